"""The outbound guard (apps/core/outbound.py): a link-local or metadata address is refused in every spelling a
client library would connect to: IPv4-mapped and NAT64 IPv6 forms are judged as the IPv4 address inside. Used by
BMC polls, service endpoints (business validation) and webhooks."""

import asyncio

import pytest

from apps.core.outbound import OutboundRefused, check_target, public_addresses
from apps.monitoring.bmc.clients import poll
from apps.monitoring.bmc.logins import BmcLogin
from apps.monitoring.choices import PollResult
from apps.monitoring.validation.loadtest import EndpointRefused, check_endpoint

METADATA_SPELLINGS = [
    "169.254.169.254",
    "::ffff:a9fe:a9fe",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::169.254.169.254",
    "64:ff9b:1::a9fe:a9fe",
    "::169.254.169.254",
    "2002:a9fe:a9fe::1",  # 6to4
    "::ffff:0:a9fe:a9fe",  # IPv4-translated (SIIT)
    "fe80::1",
    "::ffff:100.100.100.200",  # Alibaba's metadata service, mapped
    "fd00:ec2::254",
]


@pytest.mark.parametrize("address", METADATA_SPELLINGS)
def test_every_spelling_of_a_link_local_or_metadata_address_is_refused(settings, address):
    settings.RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL = False
    with pytest.raises(OutboundRefused, match="link-local or metadata"):
        check_target(address)
    with pytest.raises(OutboundRefused, match="link-local or metadata"):
        public_addresses(address, allow_private=True)  # webhooks with private targets allowed


@pytest.mark.parametrize("address", ["::ffff:a9fe:a9fe", "64:ff9b::a9fe:a9fe"])
def test_the_setting_still_allows_them(settings, address):
    settings.RACKPILOT_OUTBOUND_ALLOW_LINK_LOCAL = True
    check_target(address)


@pytest.mark.parametrize("address", ["::ffff:10.0.0.1", "64:ff9b::7f00:1", "::ffff:127.0.0.1", "2002:c0a8:1::1"])
def test_private_addresses_in_ipv6_spellings_are_private(settings, address):
    with pytest.raises(OutboundRefused, match="loopback, private or reserved"):
        public_addresses(address)


@pytest.mark.parametrize("address", ["10.0.0.1", "::ffff:10.0.0.1", "64:ff9b::808:808", "2001:db8::1"])
def test_ordinary_addresses_pass_the_link_local_check(settings, address):
    check_target(address)


def test_a_public_address_behind_nat64_is_sent_to(settings):
    assert [str(a) for a in public_addresses("64:ff9b::808:808")] == ["64:ff9b::808:808"]


@pytest.mark.parametrize("address", ["::ffff:a9fe:a9fe", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe"])
def test_a_bmc_at_a_mapped_metadata_address_is_not_polled(settings, address):
    called = []

    async def ipmi(*args, **kwargs):
        called.append(args)
        raise AssertionError("the BMC was called")

    login = BmcLogin(hostname="gpu001", protocol="ipmi", address=address, port=623, user="admin", password="x")
    outcome = asyncio.run(poll(login, ipmi=ipmi, redfish=ipmi))
    assert outcome.result == PollResult.ERROR and address in outcome.message and "link-local" in outcome.message
    assert called == []


@pytest.mark.parametrize(
    "url", ["http://[::ffff:a9fe:a9fe]/v1", "http://[::ffff:169.254.169.254]:8000/v1", "http://[64:ff9b::a9fe:a9fe]/v1"]
)
def test_a_service_endpoint_at_a_mapped_metadata_address_is_refused(settings, url):
    with pytest.raises(EndpointRefused, match="link-local or metadata"):
        check_endpoint(url)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    ["http://[::ffff:a9fe:a9fe]/hook", "http://[::ffff:169.254.169.254]/hook", "http://[64:ff9b::a9fe:a9fe]/hook"],
)
def test_a_webhook_to_a_mapped_metadata_address_is_refused_even_with_private_targets_allowed(
    settings, api_as, admin, url
):
    from apps.automation.models import Subscription

    settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE = True
    answer = api_as(admin).post(
        "/api/subscriptions/",
        {
            "name": "n",
            "channel": "webhook",
            "url": url,
            "secret": "a-shared-secret-of-some-length",
            "events": ["job.failed"],
        },
        format="json",
    )
    assert answer.status_code == 400 and "link-local or metadata" in str(answer.json()["url"])
    assert not Subscription.objects.exists()
