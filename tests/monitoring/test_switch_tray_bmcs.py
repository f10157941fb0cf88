"""An NVLink switch tray's BMC settings: one home for BMC settings (a node's or a switch tray's, never both nor
neither), over Redfish only, the password write-only and stored encrypted, through /api/bmcs/; bad input names the
field and saves nothing."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.core.models import AuditEntry
from apps.inventory.models import NvlinkDomain, NvlinkSwitchTray
from apps.monitoring.bmc import logins
from apps.monitoring.models import Bmc
from tests import factories

PASSWORD = "Pa55-word-xyz"

pytestmark = pytest.mark.django_db


@pytest.fixture
def switch_tray():
    domain = NvlinkDomain.objects.create(name="nvl09", rack=factories.make_rack(name="nvl09"), system="GB200 NVL72")
    return NvlinkSwitchTray.objects.create(name="nvl09-sw1", domain=domain, slot=1, bmc_address="10.24.9.1")


def _save(**owner):
    return logins.save_bmc(
        **owner, address="10.24.9.2", protocol="redfish", port=None, user="ops", verify_tls=True, password=PASSWORD
    )


def test_a_bmc_belongs_to_one_node_or_one_switch_tray_in_the_database_too(switch_tray):
    bmc = _save(switch_tray=switch_tray)

    assert (bmc.owner, bmc.owner_name, bmc.address) == (switch_tray, "nvl09-sw1", "10.24.9.2")
    assert bmc.password() == PASSWORD and PASSWORD not in bmc.password_encrypted
    node = factories.make_node(hostname="gpu901")
    with pytest.raises(IntegrityError), transaction.atomic():
        Bmc.objects.filter(pk=bmc.pk).update(node=node)  # both
    with pytest.raises(IntegrityError), transaction.atomic():
        Bmc.objects.filter(pk=bmc.pk).update(switch_tray=None)  # neither
    assert Bmc.objects.get().switch_tray == switch_tray


def test_saving_refuses_both_owners_and_ipmi_for_a_switch_tray_and_saves_nothing(switch_tray):
    node = factories.make_node(hostname="gpu901")

    with pytest.raises(ValidationError) as both:
        _save(node=node, switch_tray=switch_tray)
    with pytest.raises(ValidationError) as ipmi:
        logins.save_bmc(
            switch_tray=switch_tray, address="10.24.9.2", protocol="ipmi", port=None, user="ops", verify_tls=True
        )

    assert "node" in both.value.message_dict
    assert ipmi.value.message_dict["protocol"] == [logins.SWITCH_TRAY_REDFISH_ONLY]
    assert not Bmc.objects.exists()
    switch_tray.refresh_from_db()
    assert switch_tray.bmc_address == "10.24.9.1"


def test_api_sets_a_switch_trays_bmc_with_a_write_only_password(api_as, viewer, operator, switch_tray):
    body = {"switch_tray": "nvl09-sw1", "address": "10.24.9.7", "protocol": "redfish", "user": "ops"}

    assert api_as(viewer).post("/api/bmcs/", body | {"password": PASSWORD}, format="json").status_code == 403
    created = api_as(operator).post("/api/bmcs/", body | {"password": PASSWORD}, format="json")

    assert created.status_code == 201, created.content
    row = created.json()
    assert (row["switch_tray"], row["node"], row["address"], row["has_password"]) == (
        "nvl09-sw1",
        None,
        "10.24.9.7",
        True,
    )
    assert "password" not in row
    listed = api_as(viewer).get("/api/bmcs/?switch_tray=nvl09-sw1").json()["results"]
    assert [bmc["switch_tray"] for bmc in listed] == ["nvl09-sw1"] and PASSWORD not in str(listed)
    switch_tray.refresh_from_db()
    assert switch_tray.bmc_address == "10.24.9.7" and Bmc.objects.get().password() == PASSWORD
    changed = api_as(operator).patch(f"/api/bmcs/{row['id']}/", {"port": 8443}, format="json")
    assert changed.status_code == 200 and changed.json()["port"] == 8443
    assert PASSWORD not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_api_bad_input_for_a_switch_tray_names_the_field_and_saves_nothing(api_as, operator, switch_tray):
    client = api_as(operator)
    base = {"switch_tray": "nvl09-sw1", "address": "10.24.9.7", "protocol": "redfish", "user": "ops"}
    factories.make_node(hostname="gpu901")

    assert client.post("/api/bmcs/", base | {"protocol": "ipmi"}, format="json").json() == {
        "protocol": [logins.SWITCH_TRAY_REDFISH_ONLY]
    }
    assert "switch_tray" in client.post("/api/bmcs/", base | {"switch_tray": "nvl09-sw7"}, format="json").json()
    assert "node" in client.post("/api/bmcs/", base | {"node": "gpu901"}, format="json").json()  # both
    assert (
        "node" in client.post("/api/bmcs/", {k: v for k, v in base.items() if k != "switch_tray"}, format="json").json()
    )
    assert "address" in client.post("/api/bmcs/", base | {"address": "bmc;reboot"}, format="json").json()
    assert not Bmc.objects.exists()
    switch_tray.refresh_from_db()
    assert switch_tray.bmc_address == "10.24.9.1"


def test_the_rack_page_links_operators_to_a_switch_trays_bmc_form_which_saves_it(
    client, browser_as, viewer, operator, switch_tray
):
    url = f"/telemetry/switch-trays/{switch_tray.public_id}/bmc/"
    rack = switch_tray.domain.rack
    assert client.get(url).status_code == 302  # to the login page
    assert browser_as(viewer).get(url).status_code == 403
    assert url not in browser_as(viewer).get(f"/racks/{rack.public_id}/").content.decode()
    page = browser_as(operator)
    assert url in page.get(f"/racks/{rack.public_id}/").content.decode()
    form = {"address": "10.24.9.8", "protocol": "redfish", "user": "ops", "verify_tls": "on"}

    response = page.post(url, form | {"password": PASSWORD})

    assert response.status_code == 302 and response.url == f"/racks/{rack.public_id}/"
    bmc = Bmc.objects.get(switch_tray=switch_tray)
    assert (bmc.address, bmc.protocol, bmc.user, bmc.password()) == ("10.24.9.8", "redfish", "ops", PASSWORD)
    shown = page.get(url).content.decode()
    assert "BMC of switch tray nvl09-sw1" in shown and PASSWORD not in shown and "A password is stored." in shown


def test_the_switch_tray_form_refuses_ipmi_and_bad_input_naming_them_and_saves_nothing(
    browser_as, operator, switch_tray
):
    page = browser_as(operator)
    url = f"/telemetry/switch-trays/{switch_tray.public_id}/bmc/"

    ipmi = page.post(url, {"address": "10.24.9.8", "protocol": "ipmi", "user": "ops"}).content.decode()
    shell = page.post(url, {"address": "10.24.9.8; reboot", "protocol": "redfish", "user": "ops"}).content.decode()

    assert "read over Redfish (its leak detectors are only there)" in ipmi.replace("&#x27;", "'")
    assert "Enter a host name" in shell
    assert not Bmc.objects.exists()
    switch_tray.refresh_from_db()
    assert switch_tray.bmc_address == "10.24.9.1"
