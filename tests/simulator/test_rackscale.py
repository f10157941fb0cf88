"""A GB200 NVL72 tray of the simulated cluster answers its tools in their real formats, read back by the parsers, and
the rack-scale faults (a switch tray down, a tray's links degraded, an IMEX peer lost, low coolant flow, a leak)
show where an operator would look."""

import json
import re
from datetime import UTC, datetime

import pytest
from rest_framework.exceptions import ValidationError

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node, NvlinkDomain, NvlinkSwitchTray
from apps.parsers import registry
from apps.parsers.imex import parse_imex_status
from apps.parsers.nvidia_smi import parse_nvlink_status, parse_query_text, parse_topology
from apps.parsers.redfish import parse_leak_detector, parse_redfish
from apps.simulator import bmc, services

pytestmark = pytest.mark.django_db
AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture
def tray():
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    return Node.objects.get(hostname="nvl01-t01")


def fabric(text: str, field: str) -> list[str]:
    """The values of one Fabric field of `nvidia-smi -q`, one per GPU."""
    return re.findall(rf"^\s+{field}\s+: (.+)$", text, re.MULTILINE)


def run(node, *argv):
    result = services.run_command(node=node, argv=list(argv), seed=0, load=0.0)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_a_tray_answers_nvidia_smi_as_a_gb200_tray(tray):
    domain = NvlinkDomain.objects.get()

    report = parse_query_text(run(tray, "nvidia-smi", "-q"))
    assert [gpu.name for gpu in report.gpus] == ["NVIDIA GB200"] * 4
    assert report.gpus[0].memory_total_mib == 189471
    assert report.gpus[0].pci_bus_id == "00000008:01:00.0"
    text = run(tray, "nvidia-smi", "-q")
    assert fabric(text, "State") == ["Completed"] * 4
    assert fabric(text, "ClusterUUID") == [str(domain.cluster_uuid)] * 4
    assert fabric(text, "CliqueId") == ["32766"] * 4
    assert fabric(text, "Bandwidth") == ["Full"] * 4

    links = parse_nvlink_status(run(tray, "nvidia-smi", "nvlink", "-s"))
    assert [gpu.active_links for gpu in links.gpus] == [18] * 4
    assert {link.speed_gbps for gpu in links.gpus for link in gpu.links} == {50.0}

    topo = parse_topology(run(tray, "nvidia-smi", "topo", "-m"))
    assert [gpu.links["GPU3"] for gpu in topo.gpus[:3]] == ["NV18"] * 3
    assert [gpu.cpu_affinity for gpu in topo.gpus] == ["0-71", "0-71", "72-143", "72-143"]
    assert [gpu.gpu_numa_id for gpu in topo.gpus] == [2, 10, 18, 26]
    assert topo.gpus[0].numa_nodes == [0, *range(3, 10), *range(11, 18)]
    assert topo.gpus[2].numa_nodes == [1, *range(19, 26), *range(27, 34)]
    assert {cell for gpu in topo.gpus for name, cell in gpu.links.items() if name.startswith("NIC")} == {"SYS"}


def test_an_h200_node_keeps_its_fabric_fields_empty_and_has_no_imex(tray):
    node = Node.objects.get(hostname="gpu001")
    assert fabric(run(node, "nvidia-smi", "-q"), "ClusterUUID") == ["N/A"] * 8
    assert services.run_command(node=node, argv=["nvidia-imex-ctl", "-N"]).exit_code == 127


def test_imex_ctl_lists_every_tray_of_the_domain_connected(tray):
    text = run(tray, "nvidia-imex-ctl", "-N")
    nodes = [line for line in text.splitlines() if line.startswith("Node #")]
    assert len(nodes) == 18
    assert nodes[0] == "Node #0   - 10.12.0.1       - READY                - Version: 580.159"
    assert " Nodes From\\To  0   1   2" in text
    assert text.rstrip().endswith("Domain State: UP")
    assert all(line.split()[1:] == ["C"] * 18 for line in text.splitlines() if line.startswith("      "))


def test_a_switch_tray_down_takes_two_links_from_every_gpu_of_the_domain(tray):
    other = Node.objects.get(hostname="nvl01-t18")
    services.inject_fault(node=tray, kind="nvswitch_tray_down", target="3")

    for node in (tray, other):  # shown on every tray, not only where it was injected
        links = parse_nvlink_status(run(node, "nvidia-smi", "nvlink", "-s"))
        assert [[link.link for link in gpu.links if not link.active] for gpu in links.gpus] == [[4, 5]] * 4
        assert fabric(run(node, "nvidia-smi", "-q"), "Bandwidth") == ["Degraded"] * 4
        assert parse_topology(run(node, "nvidia-smi", "topo", "-m")).gpus[0].links["GPU1"] == "NV16"
    assert "NVLink switch tray 3 down" in tray.sim_faults.get().sentence

    services.clear_faults(node=tray)
    assert parse_nvlink_status(run(other, "nvidia-smi", "nvlink", "-s")).gpus[0].active_links == 18


def test_one_trays_links_degraded_leaves_the_other_trays_whole(tray):
    services.inject_fault(node=tray, kind="tray_nvlink_degraded", parameters={"links": 4})
    mine = parse_nvlink_status(run(tray, "nvidia-smi", "nvlink", "-s"))
    assert [gpu.active_links for gpu in mine.gpus] == [14] * 4
    theirs = parse_nvlink_status(run(Node.objects.get(hostname="nvl01-t02"), "nvidia-smi", "nvlink", "-s"))
    assert [gpu.active_links for gpu in theirs.gpus] == [18] * 4


def test_an_imex_peer_lost_shows_unavailable_and_the_domain_degraded_on_every_tray(tray):
    services.inject_fault(node=tray, kind="imex_peer_lost")
    text = run(Node.objects.get(hostname="nvl01-t05"), "nvidia-imex-ctl", "-N")
    assert "Node #0   - 10.12.0.1       - UNAVAILABLE" in text
    assert "Node #1   - 10.12.0.2       - READY" in text
    assert text.splitlines()[-1] == "Domain State: DEGRADED"
    row = next(line for line in text.splitlines() if line.startswith("       1 "))
    assert row.split()[1:3] == ["D", "C"]


def test_rack_scale_faults_are_refused_on_a_node_outside_a_domain_naming_the_field(tray):
    node = Node.objects.get(hostname="gpu001")
    with pytest.raises(ValidationError) as error:
        services.inject_fault(node=node, kind="nvswitch_tray_down", target="1")
    assert "rack-scale domain" in str(error.value.detail["kind"])
    with pytest.raises(ValidationError) as error:
        services.inject_fault(node=tray, kind="nvswitch_tray_down", target="10")
    assert "switch trays 1 to 9" in str(error.value.detail["target"])
    assert not node.sim_faults.exists() and not tray.sim_faults.exists()


def test_every_tray_output_is_recognised_by_the_parsers(tray):
    for argv, tool in [
        (["nvidia-smi", "-q"], "nvidia_smi_q"),
        (["nvidia-smi", "nvlink", "-s"], "nvidia_smi_nvlink"),
        (["nvidia-smi", "topo", "-m"], "nvidia_smi_topo"),
    ]:
        text = run(tray, *argv)
        assert registry.detect_tool(text) == tool
        registry.parse(tool, text)


def get(service, figures_at, path: str) -> tuple[int, dict]:
    """A GET of a simulated Redfish service (bmc.redfish, bmc.switch_tray_redfish) within a session."""
    token = "t0ken"
    status, _, body = service(figures_at, "GET", path, headers={"X-Auth-Token": token}, body=None, tokens={token})
    return status, json.loads(body)


def redfish_get(node, path: str, *, load: float = 1.0) -> tuple[int, dict]:
    return get(bmc.redfish, lambda: bmc.node_figures(node, seed=0, load=load, at=AT), path)


def test_a_trays_bmc_reads_its_coolant_and_leak_detector_and_the_faults_move_them(tray):
    status, inlet = redfish_get(tray, bmc.COOLANT_INLET)
    assert status == 200 and inlet["Status"]["Health"] == "OK"
    design = inlet["FlowLitersPerMinute"]["Reading"]
    assert 80 / 18 * 0.98 <= design <= 80 / 18 * 1.02
    assert inlet["ReturnTemperatureCelsius"]["Reading"] > inlet["SupplyTemperatureCelsius"]["Reading"]
    assert redfish_get(tray, bmc.LEAK_DETECTOR)[1]["DetectorState"] == "OK"

    services.inject_fault(node=Node.objects.get(hostname="nvl01-t09"), kind="coolant_flow_low")
    _, low = redfish_get(tray, bmc.COOLANT_INLET)  # the rack's loop: every tray reads it
    assert low["FlowLitersPerMinute"]["Reading"] < design * 0.45
    assert low["ReturnTemperatureCelsius"]["Reading"] > inlet["ReturnTemperatureCelsius"]["Reading"]
    assert low["Status"]["Health"] == "Warning"

    services.inject_fault(node=tray, kind="leak")
    _, detector = redfish_get(tray, bmc.LEAK_DETECTOR)
    assert (detector["DetectorState"], detector["Status"]["Health"]) == ("Critical", "Critical")
    assert redfish_get(tray, f"{bmc.THERMAL_SUBSYSTEM}/LeakDetection")[1]["Status"]["Health"] == "Critical"
    neighbour = Node.objects.get(hostname="nvl01-t02")
    assert redfish_get(neighbour, bmc.LEAK_DETECTOR)[1]["DetectorState"] == "OK"  # a leak is in one tray


def test_an_air_cooled_node_has_no_coolant_resources(tray):
    status, body = redfish_get(Node.objects.get(hostname="gpu001"), bmc.LEAK_DETECTOR)
    assert status == 404 and "is not a resource" in body["error"]["message"]


def test_the_parsers_read_the_imex_status_healthy_and_with_a_peer_lost(tray):
    healthy = parse_imex_status(run(tray, "nvidia-imex-ctl", "-N"))
    assert (len(healthy.nodes), healthy.domain_state, healthy.unready) == (18, "UP", [])
    assert healthy.nodes[17].address == "10.12.0.18" and healthy.nodes[17].version == "580.159"
    assert {cell for row in healthy.connections.values() for cell in row.values()} == {"C"}

    services.inject_fault(node=Node.objects.get(hostname="nvl01-t07"), kind="imex_peer_lost")
    lost = parse_imex_status(run(tray, "nvidia-imex-ctl", "-N"))
    assert lost.domain_state == "DEGRADED"
    assert [(node.number, node.state, node.version) for node in lost.unready] == [(6, "UNAVAILABLE", None)]
    assert lost.connections[0][6] == "D" and set(lost.connections[6].values()) == {"I"}


def switch_tray_get(tray, path: str, *, load: float = 0.0) -> tuple[int, dict]:
    return get(bmc.switch_tray_redfish, lambda: bmc.switch_tray_figures(tray, seed=0, load=load, at=AT), path)


def test_a_switch_trays_bmc_answers_redfish_and_a_leak_injected_on_its_slot_reads_critical(tray):
    switch_tray = NvlinkSwitchTray.objects.get(name="nvl01-sw2")
    _, chassis = switch_tray_get(switch_tray, bmc.CHASSIS)
    assert chassis["@odata.type"].startswith("#Chassis.") and "Thermal" not in chassis
    status, subsystem = switch_tray_get(switch_tray, chassis["ThermalSubsystem"]["@odata.id"])
    assert status == 200 and "CoolantConnectors" not in subsystem
    metrics = parse_redfish(json.dumps(switch_tray_get(switch_tray, subsystem["ThermalMetrics"]["@odata.id"])[1]))
    assert [sensor.name for sensor in metrics.temperatures] == ["Inlet Temp", "NVSwitch0 Temp", "NVSwitch1 Temp"]
    idle = parse_redfish(json.dumps(switch_tray_get(switch_tray, chassis["EnvironmentMetrics"]["@odata.id"])[1]))
    busy = parse_redfish(json.dumps(switch_tray_get(switch_tray, f"{bmc.CHASSIS}/EnvironmentMetrics", load=1.0)[1]))
    assert 300 < idle.consumed_watts < busy.consumed_watts < 1200
    detection = switch_tray_get(switch_tray, subsystem["LeakDetection"]["@odata.id"])[1]
    [member] = switch_tray_get(switch_tray, detection["LeakDetectors"]["@odata.id"])[1]["Members"]
    detector = switch_tray_get(switch_tray, member["@odata.id"])[1]
    assert (
        detector["@odata.type"].startswith("#LeakDetector.") and not parse_leak_detector(json.dumps(detector)).leaking
    )
    assert switch_tray_get(switch_tray, "/redfish/v1/Systems")[0] == 404  # no host on a switch tray

    services.inject_fault(node=tray, kind="leak", target="2")

    detector = switch_tray_get(switch_tray, bmc.LEAK_DETECTOR)[1]
    assert (detector["DetectorState"], detector["Status"]["Health"]) == ("Critical", "Critical")
    assert parse_leak_detector(json.dumps(detector)).leaking
    other = NvlinkSwitchTray.objects.get(name="nvl01-sw3")
    assert switch_tray_get(other, bmc.LEAK_DETECTOR)[1]["DetectorState"] == "OK"  # a leak is in one switch tray
    assert redfish_get(tray, bmc.LEAK_DETECTOR)[1]["DetectorState"] == "OK"  # not in the tray it was injected on


def test_a_switch_tray_leak_names_a_slot_of_the_domain(tray):
    with pytest.raises(ValidationError) as refused:
        services.inject_fault(node=tray, kind="leak", target="10")
    assert "nvl01 has switch trays 1 to 9, not '10'" in str(refused.value.detail["target"])
    with pytest.raises(ValidationError) as refused:
        services.inject_fault(node=Node.objects.get(hostname="gpu001"), kind="leak", target="2")
    assert "needs a compute tray of a rack-scale domain" in str(refused.value.detail)
    assert services.inject_fault(node=tray, kind="leak", target="2").summary.endswith(
        "coolant leak detected in NVLink switch tray 2"
    )
