"""A tray its BMC turned off (the leak policy's power-off, an operator's) reads off, as real BMCs and tools show it:
the System's and the Chassis' PowerState Off, 0 W, no CPU, GPU or fan reading (the BMC is on standby power), while
the rack's coolant still flows through it (return at the supply's temperature: no heat) and its leak detector still
reads; its telemetry stops (no GPU, NIC or NVLink series, no IMEX status, no energy), the other trays keep their links
and read its IMEX daemon lost. On again, it reads as before. (It read ~1,026 W, spinning fans and 4 GPUs' links.)"""

import json

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.nodeexec.sim_telemetry import Workloads
from apps.parsers.imex import parse_imex_status
from apps.parsers.ipmi import parse_dcmi_power, parse_ipmitool
from apps.simulator import bmc, services

pytestmark = pytest.mark.django_db


@pytest.fixture
def tray(clock):
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    return Node.objects.get(hostname="nvl01-t03")


def redfish(node, path: str, clock) -> dict:
    token = "t0ken"
    status, _, body = bmc.redfish(
        lambda: bmc.node_figures(node, seed=0, load=1.0, at=clock.now),
        "GET",
        path,
        headers={"X-Auth-Token": token},
        body=None,
        tokens={token},
        state_at=lambda: bmc.bmc_state(node),
    )
    assert status == 200, body
    return json.loads(body)


def test_its_bmc_reads_the_chassis_off_with_no_draw_no_host_sensors_and_the_leak_still_read(tray, clock):
    services.inject_fault(node=tray, kind="leak")
    on = redfish(tray, f"{bmc.CHASSIS}/Power", clock)["PowerControl"][0]["PowerConsumedWatts"]
    assert on > 500

    services.bmc_power(node=tray, action="off")

    assert redfish(tray, bmc.SYSTEM, clock)["PowerState"] == "Off"
    assert redfish(tray, bmc.CHASSIS, clock)["PowerState"] == "Off"
    power = redfish(tray, f"{bmc.CHASSIS}/Power", clock)
    assert power["PowerControl"][0]["PowerConsumedWatts"] == 0
    assert {supply["LastPowerOutputWatts"] for supply in power["PowerSupplies"]} == {0}
    assert redfish(tray, f"{bmc.CHASSIS}/EnvironmentMetrics", clock)["PowerWatts"]["Reading"] == 0
    thermal = redfish(tray, f"{bmc.CHASSIS}/Thermal", clock)
    assert {fan["Reading"] for fan in thermal["Fans"]} == {None}
    assert {fan["Status"]["State"] for fan in thermal["Fans"]} == {"UnavailableOffline"}
    host = [t for t in thermal["Temperatures"] if t["PhysicalContext"] in ("CPU", "GPU")]
    assert host and {t["ReadingCelsius"] for t in host} == {None}
    inlet = next(t for t in thermal["Temperatures"] if t["Name"] == "Inlet Temp")
    assert 18 <= inlet["ReadingCelsius"] <= 26  # the BMC's standby sensors still read
    coolant = redfish(tray, bmc.COOLANT_INLET, clock)
    assert coolant["FlowLitersPerMinute"]["Reading"] > 80 / 18 * 0.98  # the CDU still pumps
    assert coolant["ReturnTemperatureCelsius"]["Reading"] == pytest.approx(
        coolant["SupplyTemperatureCelsius"]["Reading"], abs=0.05
    )
    assert redfish(tray, bmc.LEAK_DETECTOR, clock)["DetectorState"] == "Critical"

    services.bmc_power(node=tray, action="on")
    assert redfish(tray, f"{bmc.CHASSIS}/Power", clock)["PowerControl"][0]["PowerConsumedWatts"] == on


def test_ipmitool_reads_no_host_sensors_and_zero_watts(tray, clock):
    services.bmc_power(node=tray, action="off")
    figures = bmc.node_figures(tray, seed=0, load=1.0, at=clock.now)

    sensors = {sensor.name: sensor for sensor in parse_ipmitool(bmc.sdr(figures)).sensors}
    host = [sensor for name, sensor in sensors.items() if name.startswith(("CPU", "GPU", "FAN"))]
    assert len(host) == 2 + 4 + bmc.FAN_COUNT and {(s.status, s.value) for s in host} == {("ns", None)}
    assert sensors["Total Power"].value == 0 and sensors["Inlet Temp"].status == "ok"
    assert parse_dcmi_power(bmc.dcmi_power_reading(figures, at=clock.now)).current_watts == 0


def test_its_telemetry_stops_while_the_other_trays_keep_their_links_and_read_its_imex_daemon_lost(tray, clock):
    before = clock.advance(minutes=10).timestamp()
    clock.advance(minutes=10)
    services.bmc_power(node=tray, action="off")
    off = clock.advance(minutes=10).timestamp()
    telemetry = services.telemetry_model(workloads=Workloads())

    assert len(telemetry.node_readings("nvl01-t03", before, keys=frozenset({"power_w"}))) == 4
    assert [links for _, links, _ in telemetry.nvlink_readings("nvl01-t03", before)] == [18] * 4
    assert telemetry.node_readings("nvl01-t03", off, keys=frozenset({"power_w"})) == []
    assert telemetry.nic_readings("nvl01-t03", off) == []
    assert telemetry.nvlink_readings("nvl01-t03", off) == []
    assert telemetry.imex_daemon_status("nvl01-t03", off) is None
    energy = telemetry.energy_j("nvl01-t03", 0, off, off + 600)
    assert energy == 0  # nothing drawn while off
    assert [down for _, _, down in telemetry.nvlink_readings("nvl01-t04", off)] == [[]] * 4

    peer = services.run_command(node=Node.objects.get(hostname="nvl01-t04"), argv=["nvidia-imex-ctl", "-N"])
    status = parse_imex_status(peer.stdout)
    assert status.domain_state == "DEGRADED"
    assert [(node.number, node.state) for node in status.unready] == [(2, "UNAVAILABLE")]
