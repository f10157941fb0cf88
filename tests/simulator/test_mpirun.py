"""mpirun-launched nccl-tests across simulated nodes: the real multi-node format, read by the same parser as the real
multi-node captures, and bus bandwidth from the slowest link on the ring (degraded cable, PFC off, MTU 1500)."""

import pytest

from apps.inventory.models import Node
from apps.parsers.nccl_tests import parse_nccl_tests
from apps.parsers.network import parse_ethtool_stats
from apps.simulator import services
from tests.simulator.conftest import real

ENV = ["-x", "NCCL_SOCKET_IFNAME=eno1", "-x", "NCCL_IB_HCA=mlx5", "-x", "NCCL_IB_GID_INDEX=3"]


def mpirun(hosts, *extra, launcher="gpu001", collective="all_reduce", sizes=("-b", "1G", "-e", "16G", "-f", "2")):
    argv = ["mpirun", "--allow-run-as-root", "-np", str(8 * len(hosts)), "-H", ",".join(f"{h}:8" for h in hosts)]
    argv += ["--bind-to", "none", *ENV, *extra, f"{collective}_perf", *sizes, "-g", "1"]
    return services.run_command(node=Node.objects.get(hostname=launcher), argv=argv)


def test_two_node_report_has_rank_lines_per_node_and_device_and_parses_like_the_real_one(demo_cluster):
    output = mpirun(["gpu001", "gpu002"])
    result = parse_nccl_tests(output.stdout)
    real_result = parse_nccl_tests(real("nccl-tests/all_reduce_perf-a100-oci-bm-gpu4.8-2node-16gpu-roce-10G.txt"))

    assert output.exit_code == 0
    assert result.status == real_result.status == "completed"
    assert [(device.host, device.device) for device in result.devices] == [
        (host, device) for host in ("gpu001", "gpu002") for device in range(8)
    ]
    assert [device.rank for device in result.devices] == list(range(16))
    assert result.parameters["ngpus"] == real_result.parameters["ngpus"] == 1
    assert [row.size_bytes for row in result.rows] == [2**30 * 2**k for k in range(5)]
    assert 330 < result.rows[-1].out_of_place.busbw_gb_per_s < 380  # 8 x 400G RoCE, in the 300s
    assert result.avg_busbw_gb_per_s is not None


def test_tag_output_prefixes_every_line_and_the_parser_strips_them(demo_cluster):
    output = mpirun(["gpu001", "gpu002"], "--tag-output")

    assert all(line.startswith("[1,0]<stdout>:") for line in output.stdout.splitlines())
    assert parse_nccl_tests(output.stdout).rows == parse_nccl_tests(mpirun(["gpu001", "gpu002"]).stdout).rows


def test_same_seed_same_report(demo_cluster):
    assert mpirun(["gpu003", "gpu004"]).stdout == mpirun(["gpu003", "gpu004"]).stdout


def large_busbw(hosts, launcher=None):
    output = mpirun(hosts, launcher=launcher or hosts[0])
    return parse_nccl_tests(output.stdout).rows[-1].out_of_place.busbw_gb_per_s


@pytest.mark.parametrize(
    ("kind", "target", "parameters", "low", "high"),
    [
        ("degraded_cable", "ens3np0", {"rate_gbps": 200}, 0.45, 0.55),  # 8 rings at the slowest NIC's rate
        ("degraded_cable", "ens3np0", {"rate_gbps": 0, "crc_per_million": 500}, 0.6, 0.7),
        ("pfc_off", "3", {}, 0.4, 0.5),
        ("mtu", "ens5np0", {"mtu": 1500}, 0.8, 0.9),
    ],
)
def test_a_fault_on_one_node_slows_every_multi_node_ring_it_is_on(demo_cluster, kind, target, parameters, low, high):
    healthy = large_busbw(["gpu005", "gpu006"])
    single = services.run_command(
        node=Node.objects.get(hostname="gpu005"), argv=["all_reduce_perf", "-b", "16G", "-e", "16G", "-g", "8"]
    )
    services.inject_fault(node=Node.objects.get(hostname="gpu005"), kind=kind, target=target, parameters=parameters)

    assert low < large_busbw(["gpu005", "gpu006"]) / healthy < high
    assert low < large_busbw(["gpu006", "gpu005", "gpu007"], launcher="gpu007") / healthy < high
    assert large_busbw(["gpu006", "gpu007"]) == pytest.approx(healthy, rel=0.03)  # not on the ring: unchanged
    if kind == "degraded_cable":  # inside the node NVLink carries the test: the cable does not show
        after = services.run_command(
            node=Node.objects.get(hostname="gpu005"), argv=["all_reduce_perf", "-b", "16G", "-e", "16G", "-g", "8"]
        )
        assert parse_nccl_tests(after.stdout).rows[-1].out_of_place.busbw_gb_per_s == pytest.approx(
            parse_nccl_tests(single.stdout).rows[-1].out_of_place.busbw_gb_per_s, rel=0.03
        )


def test_degraded_cable_shows_its_lower_rate_in_ethtool(demo_cluster):
    node = Node.objects.get(hostname="gpu008")
    services.inject_fault(node=node, kind="degraded_cable", target="ens2np0", parameters={"rate_gbps": 100})

    assert "Speed: 100000Mb/s" in services.run_command(node=node, argv=["ethtool", "ens2np0"]).stdout
    assert "Speed: 400000Mb/s" in services.run_command(node=node, argv=["ethtool", "ens1np0"]).stdout


def test_unknown_host_fails_like_open_mpi(demo_cluster):
    output = mpirun(["gpu001", "nosuchhost"])

    assert output.exit_code == 1
    assert "Could not resolve hostname nosuchhost" in output.stderr
    assert "ORTE was unable to reliably start one or more daemons." in output.stderr


def test_more_processes_than_slots_is_refused(demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    output = services.run_command(node=node, argv=["mpirun", "-np", "32", "-H", "gpu001:8,gpu002:8", "all_reduce_perf"])

    assert output.exit_code == 1 and "not enough slots" in output.stderr
    assert services.run_command(node=node, argv=["mpirun", "--version"]).stdout.startswith("mpirun (Open MPI) 4.1.6")


def test_nccl_ib_hca_limits_the_rings_to_one_rail_and_finds_the_slow_one(demo_cluster):
    services.inject_fault(
        node=Node.objects.get(hostname="gpu009"), kind="degraded_cable", target="ens4np0", parameters={"rate_gbps": 200}
    )

    def rail(device):
        output = mpirun(["gpu009", "gpu010"], "-x", f"NCCL_IB_HCA=={device}", launcher="gpu009")
        return parse_nccl_tests(output.stdout).rows[-1].out_of_place.busbw_gb_per_s

    rails = {device: rail(device) for device in ("mlx5_0", "mlx5_3", "mlx5_5")}
    assert 40 < rails["mlx5_0"] < 47 and 40 < rails["mlx5_5"] < 47  # one 400G rail: ~46 GB/s of RoCE goodput
    assert rails["mlx5_3"] == pytest.approx(rails["mlx5_0"] / 2, rel=0.05)  # ens4np0 is mlx5_3, at 200G


def counters(hostname, nic):
    output = services.run_command(node=Node.objects.get(hostname=hostname), argv=["ethtool", "-S", nic])
    return parse_ethtool_stats(output.stdout).counters


def test_a_crc_degraded_cable_counts_errors_in_proportion_to_the_traffic_it_carries(demo_cluster):
    services.inject_fault(
        node=Node.objects.get(hostname="gpu012"),
        kind="degraded_cable",
        target="ens3np0",
        parameters={"rate_gbps": 0, "crc_per_million": 200},
    )
    names = ("rx_packets", "rx_bytes", "rx_crc_errors_phy", "rx_symbol_err_phy")
    before = {(host, nic): counters(host, nic) for host in ("gpu011", "gpu012") for nic in ("ens1np0", "ens3np0")}
    assert before == {key: counters(*key) for key in before}  # no traffic, no change

    def grew(host, nic, *, after):
        return {name: after[host, nic][name] - before[host, nic][name] for name in names}

    # Launched from gpu011: the peer's NICs count the traffic too. 1-4 GiB all_reduce over 16 ranks: per node
    # (1+2+4) GiB x 2·15/16 x 21 iterations x 2 placements, over 8 rails, in 4096-byte RoCE frames.
    mpirun(["gpu011", "gpu012"], launcher="gpu011", sizes=("-b", "1G", "-e", "4G", "-f", "2"))
    after = {key: counters(*key) for key in before}
    per_rail = int(7 * 2**30 * 2 * 15 / 16 * 21 * 2 / 8)
    for host, nic in before:
        assert grew(host, nic, after=after)["rx_bytes"] == per_rail
    bad = grew("gpu012", "ens3np0", after=after)
    assert bad["rx_packets"] == per_rail // 4096
    assert bad["rx_crc_errors_phy"] == bad["rx_symbol_err_phy"] == pytest.approx(bad["rx_packets"] * 200e-6, abs=1)
    assert grew("gpu012", "ens1np0", after=after)["rx_crc_errors_phy"] == 0
    assert grew("gpu011", "ens3np0", after=after)["rx_crc_errors_phy"] == 0  # the fault is on gpu012's cable

    # One rail alone (NCCL_IB_HCA==mlx5_2, ens3np0): only that NIC carries the run.
    mpirun(["gpu011", "gpu012"], "-x", "NCCL_IB_HCA==mlx5_2", launcher="gpu011", sizes=("-b", "1G", "-e", "1G"))
    again = {key: counters(*key) for key in before}
    assert again["gpu012", "ens1np0"] == after["gpu012", "ens1np0"]
    assert again["gpu012", "ens3np0"]["rx_crc_errors_phy"] > after["gpu012", "ens3np0"]["rx_crc_errors_phy"]
