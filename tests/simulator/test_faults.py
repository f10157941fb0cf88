"""Each fault changes what the tools print the way the real fault does; clearing it gives back the healthy bytes."""

import pytest
from rest_framework.exceptions import ValidationError

from apps.core.models import AuditEntry
from apps.parsers.dcgm import parse_dcgm_diag
from apps.parsers.dmesg import parse_dmesg
from apps.parsers.infiniband import parse_ibstat, parse_ibv_devinfo
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.network import parse_ethtool, parse_ip_link, parse_mlnx_qos
from apps.parsers.nvbandwidth import parse_nvbandwidth
from apps.parsers.nvidia_smi import (
    QUERY_GPU_FIELDS,
    parse_dmon,
    parse_gpu_list,
    parse_nvlink_status,
    parse_query_gpu,
    parse_query_xml,
    parse_smi_table,
    parse_topology,
)
from apps.simulator import services
from apps.simulator.choices import FaultKind
from apps.simulator.faults.kinds import FAULT_KINDS
from apps.simulator.models import SimFault
from apps.simulator.training import FATAL_FAULTS, HANG_FAULTS, NETWORK_FAULTS
from apps.simulator.training_faults import JOB_FAULTS, SLOWING_FAULTS, TRAINING_FAULTS

QUERY = ("nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv")
ALL_REDUCE = ("all_reduce_perf", "-b", "1G", "-e", "4G", "-f", "2", "-g", "8")
# What each fault is checked through; clearing must restore every one of these byte for byte.
WATCHED = [
    ("nvidia-smi",),
    ("nvidia-smi", "-q", "-x"),
    QUERY,
    ("nvidia-smi", "topo", "-m"),
    ("nvidia-smi", "nvlink", "-s"),
    ("ip", "-j", "link"),
    ("ethtool", "ens1np0"),
    ("mlnx_qos", "-i", "ens1np0"),
    ("ibv_devinfo",),
    ("df", "-P"),
    ("dmesg",),
    ("sha256sum", "-c", "/checkpoints/llm-pretrain/SHA256SUMS"),
    ALL_REDUCE,
    ("nvbandwidth",),
    ("dcgmi", "diag", "-r", "3"),
]


def _snapshot(run, load=0.0):
    return {argv: run(*argv, load=load) for argv in WATCHED}


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("mtu", "ens1np0"),
        ("pfc_off", "3"),
        ("nvlink_down", "2"),
        ("xid79", "3"),
        ("ecc", "1"),
        ("thermal", "4"),
        ("pcie_downtrained", "5"),
        ("nic_down", "ens1np0"),
        ("disk_full", "/checkpoints"),
        ("corrupt_checkpoint", "/checkpoints/llm-pretrain/step_0005000.pt"),
        ("straggler", ""),
        ("power_cap", ""),
    ],
)
def test_clearing_a_fault_restores_the_healthy_output_exactly(gpu_node, run, kind, target):
    before = _snapshot(run)
    fault = services.inject_fault(node=gpu_node, kind=kind, target=target)
    during = _snapshot(run)
    assert during != before, f"{kind} changed nothing the tools print"
    services.clear_fault(fault=fault)
    assert _snapshot(run) == before


def test_mtu_1500_shows_in_ip_and_lowers_the_roce_mtu(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="mtu", target="ens3np0")
    links = parse_ip_link(run("ip", "-j", "link").stdout).by_name()
    assert links["ens3np0"].mtu == 1500 and links["ens1np0"].mtu == 9000
    devices = {device.name: device for device in parse_ibv_devinfo(run("ibv_devinfo").stdout).devices}
    port = devices["mlx5_2"].ports[0]
    assert port.active_mtu == 1024 and devices["mlx5_0"].ports[0].active_mtu == 4096
    assert run("cat", "/sys/class/net/ens3np0/mtu").stdout == "1500\n"


def test_pfc_off_shows_in_mlnx_qos(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="pfc_off", target="3")
    for nic in ("ens1np0", "ens8np0"):
        assert parse_mlnx_qos(run("mlnx_qos", "-i", nic).stdout).pfc_priorities == []


def test_nvlink_down_shows_in_nvlink_topo_and_bandwidth(gpu_node, run):
    healthy_peer = parse_nvbandwidth(run("nvbandwidth", "-t", "device_to_device_memcpy_read_ce").stdout)
    healthy_nccl = parse_nccl_tests(run(*ALL_REDUCE).stdout).peak_busbw_gb_per_s
    services.inject_fault(node=gpu_node, kind="nvlink_down", target="2", parameters={"link": 5})
    status = parse_nvlink_status(run("nvidia-smi", "nvlink", "-s").stdout)
    assert status.gpus[2].active_links == 17 and status.gpus[1].active_links == 18
    assert not status.gpus[2].links[5].active
    topology = parse_topology(run("nvidia-smi", "topo", "-m").stdout)
    assert topology.gpus[2].nvlink_peers["GPU0"] == 17 and topology.gpus[0].nvlink_peers["GPU2"] == 17
    assert topology.gpus[0].nvlink_peers["GPU1"] == 18
    peer = parse_nvbandwidth(run("nvbandwidth", "-t", "device_to_device_memcpy_read_ce").stdout)
    faulted, healthy = peer.testcases[0].matrix, healthy_peer.testcases[0].matrix
    assert faulted[2][0] == pytest.approx(healthy[2][0] * 17 / 18, rel=0.01)
    assert faulted[0][1] == pytest.approx(healthy[0][1], rel=0.01)
    assert parse_nccl_tests(run(*ALL_REDUCE).stdout).peak_busbw_gb_per_s < healthy_nccl * 0.97
    assert 74 in [event.xid for event in parse_dmesg(run("dmesg").stdout).xids]


def test_xid79_takes_the_gpu_off_nvidia_smi_and_logs_it(gpu_node, run):
    lost = gpu_node.gpus.get(index=3)
    services.inject_fault(node=gpu_node, kind="xid79", target="3")
    listed = parse_gpu_list(run("nvidia-smi", "-L").stdout).gpus
    assert len(listed) == 7 and lost.uuid not in [gpu.uuid for gpu in listed]
    assert [gpu.index for gpu in listed] == list(range(7))  # NVML renumbers what it still sees
    assert len(parse_smi_table(run("nvidia-smi").stdout).gpus) == 7
    xml = parse_query_xml(run("nvidia-smi", "-q", "-x").stdout)
    assert xml.attached_gpus == 7 and "00000000:5D:00.0" not in [gpu.pci_bus_id for gpu in xml.gpus]
    assert "Unable to determine the device handle for GPU0000:5D:00.0" in run("nvidia-smi", "-L").stderr
    log = run("dmesg").stdout
    assert "NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." in log
    event = next(event for event in parse_dmesg(log).xids if event.xid == 79)
    assert event.meaning == "GPU has fallen off the bus"
    failed = parse_nccl_tests(run(*ALL_REDUCE).stdout)
    assert failed.status == "failed" and "only 7 were found" in " ".join(failed.errors)
    assert run(*ALL_REDUCE).exit_code == 5


def test_ecc_shows_uncorrectable_errors_and_a_pending_remap(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="ecc", target="1", parameters={"count": 2})
    gpus = parse_query_xml(run("nvidia-smi", "-q", "-x").stdout).gpus
    assert gpus[1].ecc_errors_uncorrected_volatile == 2 and gpus[1].remapped_rows_pending is True
    assert gpus[0].ecc_errors_uncorrected_volatile == 0 and gpus[0].remapped_rows_pending is False
    assert parse_smi_table(run("nvidia-smi").stdout).gpus[1].ecc_uncorrected == 2
    assert parse_query_gpu(run(*QUERY).stdout).gpus[1].ecc_errors_uncorrected_volatile == 2
    assert {48, 63} <= {event.xid for event in parse_dmesg(run("dmesg").stdout).xids}
    diag = parse_dcgm_diag(run("dcgmi", "diag", "-r", "1").stdout).runs[0]
    assert [test.name for test in diag.failed()] == ["Page Retirement/Row Remap"]
    assert diag.failed()[0].per_gpu == {"1": "fail"}
    assert "uncorrectable ECC" in " ".join(parse_nccl_tests(run(*ALL_REDUCE).stdout).errors)


def test_thermal_slowdown_shows_heat_reasons_and_low_clocks(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="thermal", target="4")
    gpus = parse_query_gpu(run(*QUERY, load=1.0).stdout).gpus
    hot, cool = gpus[4], gpus[3]
    assert hot.temperature_c >= 90 and cool.temperature_c < 70
    assert {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown"} <= set(hot.clocks_event_reasons)
    assert hot.clocks_sm_mhz <= 1000 < cool.clocks_sm_mhz
    samples = parse_dmon(run("nvidia-smi", "dmon", "-c", "1", "-s", "pucvmet", load=1.0).stdout).samples
    assert samples[4].values["tviol"] == 1 and samples[3].values["tviol"] == 0


def test_pcie_downtrained_shows_gen_and_width_and_slows_host_copies(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="pcie_downtrained", target="5", parameters={"gen": 4, "width": 8})
    gpu = parse_query_gpu(run(*QUERY).stdout).gpus[5]
    assert (gpu.pcie_gen_current, gpu.pcie_width_current, gpu.pcie_gen_max, gpu.pcie_width_max) == (4, 8, 5, 16)
    host = parse_nvbandwidth(run("nvbandwidth", "-t", "host_to_device_memcpy_ce").stdout).testcases[0].matrix[0]
    assert host[5] == pytest.approx(host[4] / 4, rel=0.02)  # half the rate per lane, half the lanes
    assert "limited by 16.0 GT/s PCIe x8 link" in run("dmesg").stdout


def test_nic_down_shows_in_ip_ethtool_and_ibstat(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="nic_down", target="ens2np0")
    link = parse_ip_link(run("ip", "-j", "link").stdout).by_name()["ens2np0"]
    assert link.state == "DOWN" and not link.carrier
    assert parse_ip_link(run("ip", "link", "show").stdout).by_name()["ens2np0"].state == "DOWN"
    settings = parse_ethtool(run("ethtool", "ens2np0").stdout)
    assert settings.link_detected is False and settings.speed_mbps is None
    assert parse_ethtool(run("ethtool", "ens1np0").stdout).speed_mbps == 400000
    ports = {device.name: device.ports[0] for device in parse_ibstat(run("ibstat").stdout).devices}
    assert ports["mlx5_1"].state.lower() == "down" and ports["mlx5_0"].state.lower() == "active"
    assert ports["mlx5_1"].physical_state == "Disabled"


def test_disk_full_shows_100_percent_in_df(gpu_node, run):
    services.inject_fault(node=gpu_node, kind="disk_full", target="/checkpoints")
    rows = {line.split()[-1]: line.split() for line in run("df", "-P").stdout.splitlines()[1:]}
    assert rows["/checkpoints"][3] == "0" and rows["/checkpoints"][4] == "100%"
    assert rows["/scratch"][4] != "100%"
    assert " 100% /checkpoints" in run("df", "-h").stdout


def test_corrupt_checkpoint_fails_its_checksum(gpu_node, run):
    manifest = "/checkpoints/llm-pretrain/SHA256SUMS"
    assert run("sha256sum", "-c", manifest).exit_code == 0
    services.inject_fault(node=gpu_node, kind="corrupt_checkpoint")  # default: the newest checkpoint
    result = run("sha256sum", "-c", manifest)
    assert result.exit_code == 1
    assert "/checkpoints/llm-pretrain/step_0005000.pt: FAILED" in result.stdout
    assert "/checkpoints/llm-pretrain/step_0004000.pt: OK" in result.stdout
    assert result.stderr == "sha256sum: WARNING: 1 computed checksum did NOT match\n"


def test_straggler_runs_slow_clocks_and_lower_bandwidth(gpu_node, run):
    healthy = parse_nccl_tests(run(*ALL_REDUCE).stdout).peak_busbw_gb_per_s
    services.inject_fault(node=gpu_node, kind="straggler", parameters={"sm_clock_mhz": 1200})
    gpus = parse_query_gpu(run(*QUERY, load=1.0).stdout).gpus
    assert all(gpu.clocks_sm_mhz <= 1200 for gpu in gpus)
    assert all("applications_clocks_setting" in gpu.clocks_event_reasons for gpu in gpus)
    assert parse_nccl_tests(run(*ALL_REDUCE).stdout).peak_busbw_gb_per_s == pytest.approx(healthy * 0.7, rel=0.03)


def test_bad_targets_and_parameters_are_refused_naming_the_field(gpu_node):
    cases = [
        ({"kind": "nope"}, "kind"),
        ({"kind": "xid79", "target": "9"}, "target"),
        ({"kind": "mtu", "target": "eno1"}, "target"),  # the management NIC is not a data NIC
        ({"kind": "pfc_off", "target": "8"}, "target"),
        ({"kind": "disk_full", "target": "/nowhere"}, "target"),
        ({"kind": "straggler", "target": "3"}, "target"),
        ({"kind": "mtu", "parameters": {"mtu": 20}}, "parameters"),
        ({"kind": "mtu", "parameters": {"speed": 1}}, "parameters"),
    ]
    for arguments, field in cases:
        with pytest.raises(ValidationError) as raised:
            services.inject_fault(node=gpu_node, **arguments)
        assert field in raised.value.detail, arguments
    services.inject_fault(node=gpu_node, kind="mtu")
    with pytest.raises(ValidationError, match="already has a mtu fault on ens1np0"):
        services.inject_fault(node=gpu_node, kind="mtu", target="ens1np0")


def test_faults_are_audited_and_clear_all_removes_every_one(gpu_node, operator):
    services.inject_fault(node=gpu_node, kind="mtu", user=operator)
    services.inject_fault(node=gpu_node, kind="xid79", target="7", user=operator)
    assert AuditEntry.objects.filter(object_type="simulator.simfault", action="create").count() == 2
    assert services.clear_all(gpu_node) == 2
    assert not SimFault.objects.exists()
    assert AuditEntry.objects.filter(object_type="simulator.simfault", action="delete").count() == 2


def test_faults_stay_on_their_node(demo_cluster, gpu_node, run):
    from apps.inventory.models import Node

    other = Node.objects.get(hostname="gpu002")
    before = run("nvidia-smi", "-L", node=other).stdout
    services.inject_fault(node=gpu_node, kind="xid79", target="0")
    assert run("nvidia-smi", "-L", node=other).stdout == before


def test_every_fault_kind_has_one_entry_in_the_enums_order_with_its_label():
    assert list(FAULT_KINDS) == FaultKind.values
    assert [(spec.value, spec.label) for spec in FAULT_KINDS.values()] == FaultKind.choices


def test_what_a_fault_does_to_a_training_job_is_its_effects():
    assert set(NETWORK_FAULTS) == {FaultKind.MTU, FaultKind.PFC_OFF, FaultKind.NIC_DOWN}
    # a hung kernel (node_hang) stops its ranks like a dead mount: the peers' watchdog fires, no NET/IB lines
    assert set(HANG_FAULTS) == {*NETWORK_FAULTS, FaultKind.STORAGE_SLOW, FaultKind.NODE_HANG}
    assert FaultKind.DATALOADER_STALL in FATAL_FAULTS and FaultKind.DATALOADER_STALL in SLOWING_FAULTS
    assert set(TRAINING_FAULTS) - set(FATAL_FAULTS) == {FaultKind.DISK_FULL, FaultKind.CORRUPT_CHECKPOINT}
    # a fault with no effect on a job (a dead NVLink, a PCIe link downtrained) has no runbook to rehearse
    assert FaultKind.NVLINK_DOWN not in JOB_FAULTS and FaultKind.PCIE_DOWNTRAINED not in JOB_FAULTS
    assert len(JOB_FAULTS) == len(set(JOB_FAULTS)) == 13
