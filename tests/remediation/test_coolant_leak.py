"""A coolant leak through the remediation loop and on the rack's page: the shipped "Coolant leak" policy (shadow)
records that it would power the rack's trays off; on, it starts the `bmc-power` job on every tray, or, where that
kind is refused, records the decision failed with the refusal and starts nothing. The rack page says the leak first
and offers operators the power-off; viewers see the leak without the button."""

import datetime as dt

import pytest

from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import LeakSensor, Node, Rack
from apps.jobs.kinds import KINDS
from apps.jobs.models import Job
from apps.remediation import services
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import RemediationDecision, RemediationPolicy

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def leak(coolant_leak):
    return coolant_leak(at=NOW)  # nvl01-t03's


def only_the_leak_policy(mode: str) -> RemediationPolicy:
    RemediationPolicy.objects.exclude(name="Coolant leak").delete()
    policy = RemediationPolicy.objects.get(name="Coolant leak")
    policy.mode = mode
    policy.save()
    return policy


def test_the_shipped_leak_policy_powers_the_trays_off_in_shadow(leak):
    policy = RemediationPolicy.objects.get(name="Coolant leak")
    assert (policy.kind_pattern, policy.min_severity, policy.action, policy.mode) == (
        "coolant_leak",
        Severity.CRITICAL,
        Action.POWER_OFF_TRAYS,
        Mode.SHADOW,
    )
    only_the_leak_policy(Mode.SHADOW)

    [decision] = services.evaluate(now=NOW, queue=False)

    assert (decision.outcome, decision.action, decision.node.hostname) == (
        Outcome.WOULD_ACT,
        Action.POWER_OFF_TRAYS,
        "nvl01-t03",
    )
    assert decision.reason.startswith("Would power off the 18 trays of rack nvl01 through their BMCs: Coolant leak")
    assert not Job.objects.exists() and decision.job_id is None


def test_on_without_the_bmc_power_kind_the_decision_fails_with_the_refusal(leak, monkeypatch):
    monkeypatch.delitem(KINDS, services.BMC_POWER, raising=False)  # the kind another change brings
    only_the_leak_policy(Mode.ON)

    [decision] = services.evaluate(now=NOW, queue=False)

    assert decision.outcome == Outcome.FAILED
    assert decision.reason.startswith(
        "Could not power off the 18 trays of rack nvl01, nothing started: kind: Unknown job kind 'bmc-power'"
    )
    assert not Job.objects.exists()
    assert RemediationDecision.objects.get().outcome == Outcome.FAILED


def test_on_with_the_bmc_power_kind_the_job_powers_every_tray_off(leak):
    only_the_leak_policy(Mode.ON)

    [decision] = services.evaluate(now=NOW, queue=False)

    assert decision.outcome == Outcome.ACTED, decision.reason
    job = Job.objects.get()
    assert decision.outcome == Outcome.ACTED and decision.job_id == job.public_id
    assert (job.kind, job.parameters["action"], job.node_count) == ("bmc-power", "off", 18)


def test_the_rack_page_says_the_leak_first_and_offers_operators_the_power_off(leak, client, operator, viewer):
    rack = Rack.objects.get(name="nvl01")
    client.force_login(operator)

    page = client.get(f"/racks/{rack.public_id}/").content.decode()

    banner = page.index('id="rack-coolant"')
    assert banner < page.index('id="rack-power"')  # first, above everything else the rack says
    assert banner < page.index('id="health-events"')  # its switch trays' health too (registered before it)
    assert "Coolant leak in this rack" in page and "nvl01-t03&#x27;s leak sensor reads a leak" in page
    assert f"/remediation/racks/{rack.public_id}/power-off-trays/" in page and "18 trays" in page

    client.force_login(viewer)
    page = client.get(f"/racks/{rack.public_id}/").content.decode()
    assert 'id="rack-coolant"' in page and "power-off-trays" not in page
    assert client.post(f"/remediation/racks/{rack.public_id}/power-off-trays/").status_code == 403


def test_a_rack_without_a_leak_shows_no_banner_and_its_power_off_starts_nothing(leak, client, operator):
    other = Rack.objects.exclude(name="nvl01").first()
    client.force_login(operator)
    assert 'id="rack-coolant"' not in client.get(f"/racks/{other.public_id}/").content.decode()

    response = client.post(f"/remediation/racks/{other.public_id}/power-off-trays/", follow=True)

    assert "has no open coolant leak: nothing powered off" in response.content.decode()
    assert not Job.objects.exists()


def test_the_operators_power_off_names_the_refusal_where_the_kind_is_missing(leak, client, operator, monkeypatch):
    monkeypatch.delitem(KINDS, services.BMC_POWER, raising=False)
    rack = Rack.objects.get(name="nvl01")
    client.force_login(operator)

    response = client.post(f"/remediation/racks/{rack.public_id}/power-off-trays/", follow=True)

    assert "Could not power off the trays of rack nvl01, nothing started: kind: Unknown job kind" in (
        response.content.decode()
    )
    assert not Job.objects.exists()


def test_the_dashboard_lists_the_leak_first_linked_to_its_rack(leak, client, viewer):
    health.record_event(
        component=Node.objects.get(hostname="gpu001"),
        source=Source.OPERATOR,
        kind="fan_noise",
        severity=Severity.MINOR,
        summary="a fan is loud",
        at=NOW + dt.timedelta(minutes=1),
    )
    client.force_login(viewer)

    page = client.get("/").content.decode()

    rack = Rack.objects.get(name="nvl01")
    assert page.index("coolant_leak") < page.index("fan_noise")
    assert f'href="/racks/{rack.public_id}/"' in page


def switch_tray_leak(at):
    sensor = LeakSensor.objects.get(name="nvl01-sw2-leak")
    return health.record_event(
        component=health.Component.leak_sensor(sensor, None),
        source=Source.BMC_SENSORS,
        kind="coolant_leak",
        severity=Severity.CRITICAL,
        summary="Coolant leak: switch tray nvl01-sw2's leak sensor nvl01-sw2-leak reads a leak",
        evidence={"reading": "leak", "threshold": "no leak"},
        at=at,
    )


def test_a_leak_in_a_switch_tray_powers_its_domains_trays_off_counted_apart_from_the_first_trays_own_leaks(
    coolant_leak, nvl72_trays
):
    only_the_leak_policy(Mode.SHADOW)  # one attempt before an escalation, as shipped
    own = coolant_leak(nvl72_trays[0], at=NOW)  # nvl01-t01's own leak, decided first
    services.evaluate(now=NOW, queue=False)
    health.clear_event(event=own, by="operator", reason="mended")

    leak = switch_tray_leak(NOW + dt.timedelta(minutes=1))
    [decision] = services.evaluate(now=NOW + dt.timedelta(minutes=2), queue=False)

    assert (decision.event, decision.node, decision.action) == (leak, None, Action.POWER_OFF_TRAYS)
    assert (decision.outcome, decision.attempt, decision.escalated) == (Outcome.WOULD_ACT, 1, False)
    assert decision.reason.startswith(
        "Would power off the 18 trays of rack nvl01 through their BMCs: Coolant leak: switch tray nvl01-sw2"
    )


def test_a_leak_that_comes_back_powers_the_trays_off_again(leak):
    only_the_leak_policy(Mode.SHADOW)
    services.evaluate(now=NOW, queue=False)
    health.clear_event(event=leak, by="operator", reason="mended")
    again = health.record_event(
        component=health.Component.leak_sensor(LeakSensor.objects.get(node=leak.node), leak.node),
        source=Source.BMC_SENSORS,
        kind="coolant_leak",
        severity=Severity.CRITICAL,
        summary="Coolant leak: nvl01-t03's leak sensor reads a leak again",
        at=NOW + dt.timedelta(hours=1),
    )

    [decision] = services.evaluate(now=NOW + dt.timedelta(hours=1, minutes=1), queue=False)

    assert (decision.event, decision.action, decision.attempt, decision.escalated) == (
        again,
        Action.POWER_OFF_TRAYS,
        2,
        False,
    )
    assert decision.outcome == Outcome.WOULD_ACT and decision.reason.startswith("Would power off the 18 trays")
