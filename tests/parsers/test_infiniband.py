"""ibstat, ibstatus and ibv_devinfo read into the same devices and ports."""

import pytest

from apps.parsers.errors import IncompleteOutput
from apps.parsers.infiniband import normalise_state, parse_ibstat, parse_ibstatus, parse_ibv_devinfo

from .helpers import assert_parse_error, real


def test_ibstat_h100_node_with_400g_roce_ports():
    report = parse_ibstat(real("infiniband/gpud-ibstat.47.0.h100.all.active.0.txt"))

    assert len(report.devices) == 12 and report.errors == []
    mlx5_0 = report.devices[0]
    assert (mlx5_0.name, mlx5_0.ca_type, mlx5_0.firmware) == ("mlx5_0", "MT4129", "28.39.1002")
    port = mlx5_0.ports[0]
    assert (port.port, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        1,
        "ACTIVE",
        "LinkUp",
        400,
        "Ethernet",
    )
    assert sorted({device.ports[0].rate_gbps for device in report.devices}) == [100, 400]
    assert report.ports_down() == []


def test_ibstat_that_panicked_keeps_what_it_printed():
    report = parse_ibstat(real("infiniband/gpud-ibstat.39.0.a100.failed.ibpanic.exit-255.0.txt"))

    assert [device.name for device in report.devices] == [f"mlx5_{i}" for i in range(8)]
    assert report.errors == ["ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]
    assert report.devices[0].ports[0].link_layer == "InfiniBand" and report.devices[0].ports[0].lid == 13247


def test_ibstatus_rates_and_states():
    report = parse_ibstatus(real("infiniband/gpud-ibstatus.39.0.a100.all.active.0.txt"))

    assert len(report.devices) == 9
    port = report.devices[0].ports[0]
    assert (port.state, port.physical_state, port.rate_gbps, port.link_layer) == ("ACTIVE", "LinkUp", 200, "InfiniBand")
    assert port.lid == 0x33BF and port.gid.startswith("fe80:")


def test_ibv_devinfo_roce_functions():
    report = parse_ibv_devinfo(real("infiniband/ibv_devinfo-dgx-spark-gb10-4port-cx7-roce.txt"))

    assert [device.name for device in report.devices] == ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
    device = report.devices[0]
    assert (device.firmware, device.vendor_part_id) == ("28.45.4028", "4129")
    port = device.ports[0]
    assert (port.state, port.link_layer, port.active_mtu, port.max_mtu) == ("ACTIVE", "Ethernet", 1024, 4096)


def test_a_down_port_is_reported():
    text = (
        "CA 'mlx5_3'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Disabled\n\t\tRate: 10\n\t\tLink layer: InfiniBand\n"
    )

    report = parse_ibstat(text)

    assert report.ports_down() == [("mlx5_3", 1)]
    assert report.devices[0].ports[0].physical_state == "Disabled"


def test_state_spellings():
    assert normalise_state("4: ACTIVE") == normalise_state("PORT_ACTIVE (4)") == normalise_state("Active") == "ACTIVE"
    assert normalise_state("1: DOWN") == "DOWN"


def test_not_infiniband_output_is_rejected():
    assert_parse_error(parse_ibstat, "", 1, "empty input")
    assert_parse_error(parse_ibstat, real("h200-1gpu/lscpu.txt"), 1, "CA '<device>'")
    assert_parse_error(parse_ibstatus, real("h200-1gpu/lscpu.txt"), 1, "Infiniband device")
    assert_parse_error(parse_ibv_devinfo, "\n\nport: 1\n", 3, "hca_id")


def _first_lines(relative: str, count: int) -> str:
    return "\n".join(real(relative).split("\n")[:count]) + "\n"


def test_ibstat_cut_inside_a_ca_is_incomplete():
    # the real H100 output, cut after the second CA's 'Number of ports: 1' line and before its 'Port 1:'
    with pytest.raises(IncompleteOutput) as caught:
        parse_ibstat(_first_lines("infiniband/gpud-ibstat.47.0.h100.all.active.0.txt", 20))

    assert caught.value.line == 21
    assert "CA 'mlx5_1' (line 18) declares 'Number of ports: 1', the output holds 0 of them" in str(caught.value)
    assert [device.name for device in caught.value.partial.devices] == ["mlx5_0", "mlx5_1"]


def test_ibstat_cut_inside_a_port_is_incomplete():
    with pytest.raises(IncompleteOutput, match=r"port 1 of CA 'mlx5_0' stops before its 'Link layer' line"):
        parse_ibstat(_first_lines("infiniband/gpud-ibstat.47.0.h100.all.active.0.txt", 12))
