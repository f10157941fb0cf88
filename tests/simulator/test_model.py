"""The figures come from the model: calibrated on the real H200, set by the slowest link, deterministic per seed."""

import dataclasses
from decimal import Decimal

import pytest

from apps.inventory import gpu_power
from apps.inventory.catalogue import AMPERE_COMPUTE
from apps.inventory.models import Firmware, GpuSku, Node
from apps.parsers.dmesg import parse_dmesg
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.nvbandwidth import parse_nvbandwidth
from apps.parsers.nvidia_smi import QUERY_GPU_FIELDS, parse_dmon, parse_query_gpu, parse_query_xml, parse_topology
from apps.parsers.system import parse_lscpu, parse_numactl
from apps.simulator import services
from apps.simulator.model import compute_facts
from tests import factories

QUERY = ",".join(QUERY_GPU_FIELDS)


def _gpus(run, **kwargs):
    return parse_query_gpu(run("nvidia-smi", f"--query-gpu={QUERY}", "--format=csv", **kwargs).stdout).gpus


def test_hbm_copy_is_88_percent_of_the_datasheet(run):
    report = parse_nvbandwidth(run("nvbandwidth", "-t", "device_local_copy").stdout)
    values = report.testcase("device_local_copy").matrix[0]
    assert len(values) == 8
    for value in values:
        assert 0.86 <= value / 4800 <= 0.90  # H200: 4.8 TB/s datasheet, 4.21 TB/s measured on a real card


def test_pcie_copies_reach_what_gen5_x16_measured(run):
    report = parse_nvbandwidth(run("nvbandwidth", "-t", "host_to_device_memcpy_ce").stdout)
    assert all(54 <= value <= 56 for value in report.testcase("host_to_device_memcpy_ce").matrix[0])


def test_all_reduce_on_8_gpus_reaches_a_sensible_bus_bandwidth(run):
    result = parse_nccl_tests(run("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8").stdout)
    assert result.status == "completed"
    assert 330 <= result.peak_busbw_gb_per_s <= 420  # ring over 18 NVLinks of ~26.6 GB/s each, ~78% efficient
    small, large = result.rows[0], result.rows[-1]
    assert 8 <= small.out_of_place.time_us <= 40  # latency-bound: time, not bandwidth, at 8 bytes
    kilobyte = next(row for row in result.rows if row.size_bytes == 1024)
    assert large.out_of_place.busbw_gb_per_s > 100 * kilobyte.out_of_place.busbw_gb_per_s  # bandwidth-bound when large
    for row in result.rows:  # busbw = algbw * 2(n-1)/n, to the printed precision
        if row.out_of_place.algbw_gb_per_s > 1:
            assert row.out_of_place.busbw_gb_per_s == pytest.approx(row.out_of_place.algbw_gb_per_s * 1.75, rel=0.01)


def test_collective_factors_follow_the_nccl_tests_formulas(run):
    gather = parse_nccl_tests(run("all_gather_perf", "-b", "1G", "-e", "1G", "-g", "8").stdout).rows[0]
    assert gather.out_of_place.busbw_gb_per_s == pytest.approx(gather.out_of_place.algbw_gb_per_s * 7 / 8, rel=0.01)
    assert gather.count == 2**30 // 4 // 8  # per-rank count, as nccl-tests prints it
    broadcast = parse_nccl_tests(run("broadcast_perf", "-b", "1G", "-e", "1G", "-g", "8").stdout).rows[0]
    assert broadcast.out_of_place.busbw_gb_per_s == pytest.approx(broadcast.out_of_place.algbw_gb_per_s, rel=0.01)


def test_inter_node_bandwidth_is_set_by_the_slowest_link(demo_cluster):
    nodes = list(Node.objects.filter(hostname__in=["gpu001", "gpu002"]).order_by("hostname"))
    healthy = parse_nccl_tests(services.run_nccl_tests(nodes=nodes, min_bytes="1G", max_bytes="4G").stdout)
    assert len(healthy.devices) == 16 and {device.host for device in healthy.devices} == {"gpu001", "gpu002"}
    # 8 x 400G RoCE per node at ~92% goodput: ~368 GB/s, just under the NVLink ring
    assert 330 <= healthy.peak_busbw_gb_per_s <= 380
    services.inject_fault(node=nodes[1], kind="mtu", target="ens5np0")
    one_slow_nic = parse_nccl_tests(services.run_nccl_tests(nodes=nodes, min_bytes="1G", max_bytes="4G").stdout)
    # one NIC at RoCE MTU 1024 slows its ring, and every ring waits for the slowest
    assert one_slow_nic.peak_busbw_gb_per_s == pytest.approx(healthy.peak_busbw_gb_per_s * 0.85, rel=0.03)
    single = parse_nccl_tests(services.run_nccl_tests(nodes=nodes[:1], min_bytes="1G", max_bytes="4G").stdout)
    assert single.peak_busbw_gb_per_s > one_slow_nic.peak_busbw_gb_per_s  # the fault is on the network, not NVLink


def test_small_multi_node_messages_pay_network_latency(demo_cluster):
    nodes = list(Node.objects.filter(hostname__in=["gpu001", "gpu009"]).order_by("hostname"))
    two = parse_nccl_tests(services.run_nccl_tests(nodes=nodes, min_bytes=8, max_bytes=8).stdout)
    one = parse_nccl_tests(services.run_nccl_tests(nodes=nodes[:1], min_bytes=8, max_bytes=8).stdout)
    assert two.rows[0].out_of_place.time_us > one.rows[0].out_of_place.time_us


def test_power_climbs_to_the_cap_under_load_with_sw_power_cap(run):
    for gpu in _gpus(run, load=1.0):
        assert gpu.power_limit_w == 700
        assert 680 <= gpu.power_draw_w <= 700
        assert "sw_power_cap" in gpu.clocks_event_reasons
        assert 1400 <= gpu.clocks_sm_mhz <= 1500  # down from 1980 MHz, as on the real H200
        assert gpu.utilization_gpu_pct == 100
    samples = parse_dmon(run("nvidia-smi", "dmon", "-c", "4", "-s", "pucvmet", load=1.0).stdout).samples
    assert [sample.values["pviol"] for sample in samples if sample.gpu == 0] == [0, 100, 100, 100]


def test_idle_gpus_look_like_the_idle_capture(run):
    for gpu in _gpus(run):
        assert gpu.clocks_sm_mhz == 345 and gpu.clocks_event_reasons == ["gpu_idle"]
        assert 70 <= gpu.power_draw_w <= 130
        assert 30 <= gpu.temperature_c <= 42
        assert gpu.memory_total_mib == 143771 and gpu.memory_used_mib == 0


def test_numa_layout_comes_from_the_inventory(run):
    cpu = parse_lscpu(run("lscpu", "-J").stdout)
    assert (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core, cpu.numa_nodes) == (2, 56, 2, 2)
    assert cpu.model_name == "Intel(R) Xeon(R) Platinum 8480+"
    numa = parse_numactl(run("numactl", "-H").stdout)
    assert [len(node.cpus) for node in numa.nodes] == [112, 112]
    assert numa.distances == [[10, 21], [21, 10]]
    topology = parse_topology(run("nvidia-smi", "topo", "-m").stdout)
    assert [gpu.numa_affinity for gpu in topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topology.gpus[0].links["NIC0"] == "PIX" and topology.gpus[0].links["NIC7"] == "SYS"
    assert topology.gpus[0].links["NIC2"] == "NODE"
    assert topology.gpus[5].cpus == numa.nodes[1].cpus


def test_firmware_versions_come_from_the_inventory(demo_cluster, run):
    behind = Node.objects.get(hostname="gpu017")
    assert run("dmidecode", "-s", "bios-version", node=behind).stdout == "2.3.5\n"
    assert run("dmidecode", "-s", "bios-version").stdout == "2.4.1\n"
    gpu001 = Node.objects.get(hostname="gpu001")
    Firmware.objects.filter(node=gpu001, target="GPU3").update(version="96.00.A5.00.1B")
    assert [gpu.vbios_version for gpu in _gpus(run)][3] == "96.00.A5.00.1B"
    Firmware.objects.filter(node=gpu001, target="ens2np0").update(version="28.42.1000")
    assert "firmware-version: 28.42.1000 " in run("ethtool", "-i", "ens2np0").stdout


def test_same_seed_same_bytes_other_seed_other_noise(run):
    argv = ("all_reduce_perf", "-b", "1M", "-e", "1G", "-f", "2", "-g", "8")
    assert run(*argv, seed=7).stdout == run(*argv, seed=7).stdout
    assert run(*argv, seed=7).stdout != run(*argv, seed=8).stdout
    first = parse_nccl_tests(run(*argv, seed=7).stdout).peak_busbw_gb_per_s
    second = parse_nccl_tests(run(*argv, seed=8).stdout).peak_busbw_gb_per_s
    assert first == pytest.approx(second, rel=0.03)  # noise is small; the model sets the figure
    assert run("nvidia-smi", "-q", "-x", seed=3).stdout == run("nvidia-smi", "-q", "-x", seed=3).stdout


def test_healthy_kernel_log_has_no_xid(run):
    assert parse_dmesg(run("dmesg").stdout).xids == []


def test_the_simulator_draws_by_the_catalogues_figures(run, monkeypatch):
    def idle_draws():
        return [gpu.power_draw_w for gpu in _gpus(run)]

    before = idle_draws()
    quieter = dataclasses.replace(gpu_power.H200_MEASURED, idle_w=40.0)
    monkeypatch.setitem(gpu_power.GPU_POWER_MODELS, "H200 SXM", quieter)
    after = idle_draws()
    # the same seed, so the same jitter (±2 %) around 38 W less idle draw, and the sampler's own wake-ups unchanged
    assert all(36 <= old - new <= 40 for old, new in zip(before, after, strict=True))


@pytest.mark.django_db
def test_an_sku_an_operator_added_reports_its_own_architecture_and_computes_like_it():
    sku = GpuSku.objects.create(
        name="A100 PCIe 80GB",
        architecture="Ampere",
        hbm_gib=80,
        mem_bandwidth_tb_per_s=Decimal("1.94"),
        mem_bandwidth_reference_tb_per_s=Decimal("1.71"),
        nvlink_gb_per_s=600,
        tdp_w=300,
        bf16_dense_tflops=Decimal("312"),
    )
    node = factories.make_node(gpu_sku=sku)
    factories.make_gpu(node=node, sku=sku)

    xml = services.run_command(node=node, argv=["nvidia-smi", "-q", "-x"], seed=0, load=0.0).stdout
    gpu = services.node_state(node=node).gpus[0]

    assert parse_query_xml(xml).gpus[0].architecture == "Ampere"
    assert compute_facts(gpu) is AMPERE_COMPUTE  # not the H200 shape its other facts fall back to
