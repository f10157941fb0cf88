"""The on-call walk on a GB200 NVL72 rack after a coolant leak in one tray: the BMC poll records the leak; the leak
policy (on) powers the rack's trays off through their BMCs, its job's reason naming the tray whose sensor reads the
leak and what it powers off; the power each BMC reads back is recorded on the trays. Then the rack page says the trays
are off (none of its draw counted, no power-off offered again; power-on offered to operators), the next poll folds the
leak into its one event and reads no draw, and the loop's readings show beside its limits."""

import pytest
from django.utils import timezone

from apps.health.models import HealthEvent
from apps.inventory.choices import PowerState
from apps.inventory.models import Node, NvlinkSwitchTray, Rack
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring.panels import racks_power
from apps.remediation import services
from apps.remediation.choices import Mode, Outcome
from apps.remediation.models import RemediationPolicy
from apps.simulator import services as simulator
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_reboots(settings):
    settings.RACKPILOT_SIM_REBOOT_SECONDS = 0


def poll(run_shards, nodes):
    job = create_job(kind="bmc-poll", targets=TargetSpec(nodes=tuple(n.hostname for n in nodes)), transport="sim")
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED, list(job.events.values_list("message", flat=True))
    return job


def test_after_the_leak_policy_powers_the_trays_off_the_rack_reads_them_off(
    clock, nvl72_trays, run_shards, client, operator
):
    rack = Rack.objects.get(name="nvl01")
    simulator.inject_fault(node=nvl72_trays[2], kind="leak")
    poll(run_shards, nvl72_trays)
    [leak] = HealthEvent.objects.filter(kind="coolant_leak")
    assert racks_power([rack.pk])[rack.pk].watts > 10_000  # the 18 trays draw

    page = client_page(client, operator, rack)
    assert "from 18 of the 18 trays on, read by their BMC" in page
    assert 'id="coolant-now-' in page and "1 of 18 read a leak (nvl01-t03)" in page  # the loop now, by its limits
    assert "flow <strong>" in page and "design flow 80.0 l/min" in page
    # The loop's 27 sensors, of which the 9 in switch trays without BMC settings no poll reads: said beside "18".
    assert "27 leak sensors (18 in compute trays, 9 in switch trays)" in page
    assert "9 in switch trays without BMC settings, not read" in page

    RemediationPolicy.objects.exclude(name="Coolant leak").delete()
    RemediationPolicy.objects.filter(name="Coolant leak").update(mode=Mode.ON)
    [decision] = services.evaluate(now=clock.now, queue=False)
    assert decision.outcome == Outcome.ACTED, decision.reason
    job = run_shards(Job.objects.get(public_id=decision.job_id))

    assert job.status == JobStatus.SUCCEEDED
    assert job.parameters["reason"] == (
        "coolant leak at nvl01-t03 (leak sensor nvl01-t03-leak): powering off the 18 trays of rack nvl01"
    )
    assert set(Node.objects.filter(rack=rack).values_list("power_state", flat=True)) == {PowerState.OFF}
    assert racks_power([rack.pk]).get(rack.pk) is None  # nothing counted from trays that are off

    poll(run_shards, nvl72_trays)
    assert HealthEvent.objects.filter(kind="coolant_leak").get() == leak  # folded, no new event
    assert HealthEvent.objects.count() == 1
    assert set(Node.objects.filter(rack=rack).values_list("power_state", flat=True)) == {PowerState.OFF}

    page = client_page(client, operator, rack)
    assert "0 of 18 trays on" in page and "18 powered off through their BMCs" in page
    assert "<span>Ready · off</span>" in page  # each tray in the elevation, drawn as off (grey), not by its status
    assert page.count('class="dev node off"') == 36  # 18 trays, each on both faces
    assert "every node is powered off" in page
    assert "power-off-trays" not in page  # nothing left to power off
    assert f"/remediation/racks/{rack.public_id}/power-on/" in page
    assert "1 of 18 read a leak (nvl01-t03)" in page  # the leak sensors still read on standby power

    # The policy, asked again, has nothing to power off; the operator's power-off says so and starts nothing.
    response = client.post(f"/remediation/racks/{rack.public_id}/power-off-trays/", follow=True)
    assert "the 18 trays of rack nvl01 are powered off already" in response.content.decode()
    assert Job.objects.filter(kind="bmc-power").count() == 1

    # The leak mended (the sensor dry, the event cleared): the operator powers them back on.
    simulator.clear_faults(node=nvl72_trays[2], kind="leak")
    response = client.post(f"/remediation/racks/{rack.public_id}/power-on/")
    on = Job.objects.filter(kind="bmc-power").exclude(pk=job.pk).get()
    assert response.status_code == 302 and (on.parameters["action"], on.node_count) == ("on", 18)
    run_shards(on)
    assert set(Node.objects.filter(rack=rack).values_list("power_state", flat=True)) == {PowerState.ON}


def client_page(client, user, rack) -> str:
    client.force_login(user)
    return client.get(f"/racks/{rack.public_id}/").content.decode()


def test_the_power_off_of_a_rack_with_one_tray_off_acts_on_the_others_and_says_so(nvl72_trays, coolant_leak):
    Node.objects.filter(pk=nvl72_trays[0].pk).update(power_state=PowerState.OFF)
    coolant_leak(nvl72_trays[2])

    job = services.power_off_trays(node=nvl72_trays[2], queue=False)

    assert job.node_count == 17 and "nvl01-t01" not in job.target_spec["nodes"]
    assert job.parameters["reason"].endswith("powering off 17 of the 18 trays of rack nvl01")


def test_an_air_cooled_server_its_bmc_reads_off_is_offered_the_same_power_on(
    nvl72_trays, run_shards, client, operator, viewer
):
    server = Node.objects.get(hostname="gpu003")  # an H200 server beside the NVL72 rack, no tray of a domain
    factories.make_sim_bmc(server)
    Node.objects.filter(pk=server.pk).update(power_state=PowerState.OFF, power_state_since=timezone.now())
    rack = server.rack

    page = client_page(client, operator, rack)
    assert "Nodes powered off" in page and "1 node powered off through its BMC: gpu003" in page
    assert f"/remediation/racks/{rack.public_id}/power-on/" in page and "Power the node on</button>" in page
    assert "/power-on/" not in client_page(client, viewer, rack)  # viewers see it off, with no button
    assert client.post(f"/remediation/racks/{rack.public_id}/power-on/").status_code == 403

    client.force_login(operator)
    response = client.post(f"/remediation/racks/{rack.public_id}/power-on/")
    job = Job.objects.get(kind="bmc-power")
    assert response.status_code == 302 and job.target_spec["nodes"] == ["gpu003"]
    assert (job.parameters["action"], job.parameters["reason"]) == ("on", "powering gpu003 back on")
    run_shards(job)
    server.refresh_from_db()
    assert server.power_state == PowerState.ON


def test_a_leak_in_a_switch_tray_powers_the_rack_trays_off_and_the_rack_page_says_so_first(
    clock, nvl72_trays, run_shards, client, operator
):
    """The switch trays' own BMCs are read: the rack page counts their 9 leak sensors with the compute trays' 18, a
    leak in one of them is the rack's leak, and the leak policy (on) powers the domain's 18 compute trays off."""
    rack = Rack.objects.get(name="nvl01")
    switch_trays = list(NvlinkSwitchTray.objects.filter(domain__rack=rack).order_by("slot"))
    for tray in switch_trays:
        factories.make_sim_bmc(tray)
    poll(run_shards, nvl72_trays)

    page = client_page(client, operator, rack)
    assert "leak sensors: 27 read, dry" in page and "not read" not in page
    assert 'id="rack-coolant"' not in page

    simulator.inject_fault(node=nvl72_trays[0], kind="leak", target="4")  # in switch tray 4, not in nvl01-t01
    poll(run_shards, nvl72_trays)
    [leak] = HealthEvent.objects.filter(kind="coolant_leak")
    assert (leak.node, leak.nvlink_switch_tray) == (None, switch_trays[3])

    page = client_page(client, operator, rack)
    banner = page.index('id="rack-coolant"')
    assert banner < page.index('id="rack-power"') and "Coolant leak in this rack" in page
    assert "switch tray nvl01-sw4&#x27;s leak sensor nvl01-sw4-leak reads a leak" in page
    assert "1 of 27 read a leak (nvl01-sw4)" in page
    assert f"/remediation/racks/{rack.public_id}/power-off-trays/" in page and "18 trays" in page

    RemediationPolicy.objects.exclude(name="Coolant leak").delete()
    RemediationPolicy.objects.filter(name="Coolant leak").update(mode=Mode.ON)
    [decision] = services.evaluate(now=clock.now, queue=False)
    assert decision.outcome == Outcome.ACTED, decision.reason
    assert decision.node is None and decision.reason.startswith("Started: power off the 18 trays of rack nvl01")
    job = run_shards(Job.objects.get(public_id=decision.job_id))
    assert job.status == JobStatus.SUCCEEDED and job.node_count == 18
    assert job.parameters["reason"] == (
        "coolant leak at nvl01-sw4 (leak sensor nvl01-sw4-leak): powering off the 18 trays of rack nvl01"
    )
    assert set(Node.objects.filter(rack=rack).values_list("power_state", flat=True)) == {PowerState.OFF}


def test_an_operator_clears_the_leak_from_the_rack_page_and_is_brought_back_to_it(
    nvl72_trays, coolant_leak, client, operator, viewer
):
    event = coolant_leak(nvl72_trays[2])
    rack = nvl72_trays[2].rack
    clear = f"/health/events/{event.public_id}/clear/"
    assert clear in client_page(client, operator, rack)
    assert clear not in client_page(client, viewer, rack)  # viewers read it, no form

    client.force_login(operator)
    response = client.post(clear, {"reason": "drip pan dried, fitting reseated", "back": "rack"})

    assert response.status_code == 302 and response.url == f"/racks/{rack.public_id}/"
    event.refresh_from_db()
    assert not event.is_open and event.clear_reason == "drip pan dried, fitting reseated"
    assert "Coolant leak in this rack" not in client_page(client, operator, rack)
