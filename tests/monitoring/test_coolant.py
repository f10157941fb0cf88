"""A liquid-cooled tray's coolant read by the BMC poll (Redfish ThermalSubsystem) and recorded in the health loop: a
leak is a critical event on the tray's leak sensor, low flow a major one on its coolant, each with the reading and
the threshold; a healthy tray and an air-cooled node record nothing."""

import pytest

from apps.health.choices import ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import LeakSensor, Node, NvlinkSwitchTray
from apps.jobs.choices import JobStatus
from apps.monitoring.bmc.coolant import FLOW_LOW_SHARE
from apps.monitoring.bmc.polling import schedule_polls
from apps.monitoring.choices import PollResult
from apps.monitoring.models import Bmc, BmcReading
from apps.simulator import services as simulator
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tray(nvl72_trays):
    return nvl72_trays[2]  # nvl01-t03


def test_a_healthy_tray_records_nothing_and_a_leak_is_a_critical_event_on_its_leak_sensor(tray, poll):
    job = poll(tray)
    assert job.status == JobStatus.SUCCEEDED
    assert not HealthEvent.objects.exists()

    simulator.inject_fault(node=tray, kind="leak")
    job = poll(tray)

    event = HealthEvent.objects.get()
    sensor = LeakSensor.objects.get(node=tray)
    assert (event.kind, event.severity, event.source) == ("coolant_leak", Severity.CRITICAL, Source.BMC_SENSORS)
    assert (event.component_type, event.component_key, event.node) == (
        ComponentType.LEAK_SENSOR,
        f"leak_sensor:{sensor.pk}",
        tray,
    )
    assert f"nvl01-t03's leak sensor {sensor.name} reads a leak" in event.summary
    assert event.evidence[-1]["reading"] == "leak" and event.evidence[-1]["loop"] == "nvl01-loop"
    assert job.events.filter(level="error", message__contains="Coolant leak").exists()


def test_low_flow_is_a_major_event_with_the_reading_and_the_threshold(tray, poll):
    simulator.inject_fault(node=tray, kind="coolant_flow_low")

    poll(tray)

    event = HealthEvent.objects.get(kind="coolant_flow_low")
    loop = tray.rack.coolant_loops.get()
    floor = round(float(loop.design_flow_lpm) / 18 * FLOW_LOW_SHARE, 2)
    assert (event.severity, event.component_key) == (Severity.MAJOR, f"coolant:{tray.pk}")
    observation = event.evidence[-1]
    assert observation["threshold"] == floor and observation["reading"] < floor and observation["unit"] == "l/min"
    assert f"below {floor:g} l/min" in event.summary
    assert not HealthEvent.objects.filter(kind="coolant_leak").exists()


def test_the_node_page_shows_a_trays_own_coolant_and_nothing_for_an_air_cooled_node(tray, poll, browser_as, viewer):
    simulator.inject_fault(node=tray, kind="leak")
    poll(tray)
    client = browser_as(viewer)

    page = client.get(f"/nodes/{tray.public_id}/").content.decode()
    assert "<dt>Coolant</dt>" in page and "loop nvl01-loop · supply ≤ 40.0 °C" in page  # the loop's limits beside
    assert "1 of 1 read a leak (nvl01-t03)" in page and "flow <strong>" in page and "from its BMC" in page

    neighbour, server = Node.objects.get(hostname="nvl01-t04"), Node.objects.get(hostname="gpu001")
    factories.make_sim_bmc(server)
    page = client.get(f"/nodes/{neighbour.public_id}/").content.decode()
    assert "Now: no reading of its BMC in the last 10 minutes." in page  # a tray of the loop, not polled yet
    assert "Coolant" not in client.get(f"/nodes/{server.public_id}/").content.decode()  # an air-cooled H200 server


@pytest.fixture
def switch_tray(nvl72_trays):
    """nvl01-sw3, with its BMC settings for the simulated BMCs (Redfish)."""
    tray = NvlinkSwitchTray.objects.get(name="nvl01-sw3")
    factories.make_sim_bmc(tray)
    return tray


def test_a_poll_reads_the_switch_trays_bmcs_and_a_leak_there_is_a_critical_event_on_its_leak_sensor(
    tray, switch_tray, poll, api_as, viewer
):
    job = poll(tray)
    bmc = Bmc.objects.get(switch_tray=switch_tray)
    assert (bmc.last_result, bmc.polls_ok) == (PollResult.OK, 1)
    rows = api_as(viewer).get(f"/api/bmcs/{bmc.public_id}/readings/").json()
    sensors = {row["sensor"]: row for row in rows}
    assert {"Inlet Temp", "NVSwitch0 Temp", "NVSwitch1 Temp", "Power Consumed", "Leak detectors leaking"} <= set(
        sensors
    )
    assert sensors["Leak detectors leaking"]["value"] == 0 and sensors["NVSwitch0 Temp"]["switch_tray"] == "nvl01-sw3"
    assert not HealthEvent.objects.exists()
    assert job.events.filter(message__startswith="nvl01-sw3: ").exists()
    assert job.events.filter(message__endswith=" BMC readings stored from 1 node and 1 switch tray").exists()

    simulator.inject_fault(node=tray, kind="leak", target="3")  # the leak is in switch tray 3, not in the compute tray
    job = poll(tray)

    event = HealthEvent.objects.get()
    sensor = LeakSensor.objects.get(switch_tray=switch_tray)
    assert (event.kind, event.severity, event.source) == ("coolant_leak", Severity.CRITICAL, Source.BMC_SENSORS)
    assert (event.component_key, event.node, event.nvlink_switch_tray) == (
        f"leak_sensor:{sensor.pk}",
        None,
        switch_tray,
    )
    assert f"switch tray nvl01-sw3's leak sensor {sensor.name} reads a leak" in event.summary
    assert event.evidence[-1]["loop"] == "nvl01-loop"
    assert job.events.filter(level="error", message__contains="Coolant leak: switch tray nvl01-sw3").exists()


def test_a_switch_tray_bmc_refusing_the_login_is_a_poll_result_and_the_rack_page_says_its_sensor_is_unread(
    nvl72_trays, switch_tray, poll, browser_as, viewer
):
    factories.make_sim_bmc(switch_tray, password="not-the-password")

    job = poll(*nvl72_trays)

    bmc = Bmc.objects.get(switch_tray=switch_tray)
    assert (bmc.last_result, bmc.polls_failed) == (PollResult.AUTH_FAILED, 1)
    assert bmc.last_message == f"BMC {switch_tray.bmc_address} (nvl01-sw3) refused the credentials of user 'admin'"
    assert not BmcReading.objects.filter(switch_tray=switch_tray).exists()
    assert job.events.filter(level="error", message__startswith="nvl01-sw3: BMC").exists()
    page = browser_as(viewer).get(f"/racks/{switch_tray.domain.rack.public_id}/").content.decode()
    assert "18 read, dry" in page  # the compute trays'; the 8 other switch trays have no BMC settings
    assert "1 not read in the last 10 minutes (nvl01-sw3-leak): no reading from their trays" in page
    assert "8 in switch trays without BMC settings, not read" in page


def test_a_sites_scheduled_poll_reads_its_switch_trays_too(switch_tray, run_shards):
    [job] = schedule_polls()
    assert job.parameters["site"] == switch_tray.domain.rack.site.slug

    run_shards(job)

    assert Bmc.objects.get(switch_tray=switch_tray).last_result == PollResult.OK
    assert BmcReading.objects.filter(switch_tray=switch_tray, sensor="Leak detectors leaking", value=0).exists()
