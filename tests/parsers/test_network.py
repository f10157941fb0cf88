"""ethtool, ip link, netstat -i, mlnx_qos and ib_write_bw."""

import pytest

from apps.parsers.network import (
    parse_ethtool,
    parse_ethtool_driver,
    parse_ethtool_stats,
    parse_ib_write_bw,
    parse_ip_link,
    parse_mlnx_qos,
    parse_netstat_i,
)

from .helpers import assert_parse_error, data, real


def test_ethtool_settings_with_wrapped_link_modes():
    settings = parse_ethtool(real("network/ethtool-eth0-1000Mbs-qemu-softroce-rxe-dev-issue52.txt"))

    assert (settings.interface, settings.speed_mbps, settings.duplex) == ("eth0", 1000, "Full")
    assert settings.auto_negotiation is True and settings.link_detected is True
    assert settings.supported_link_modes[-1] == "1000baseT/Full" and len(settings.supported_link_modes) == 5
    assert settings.fields["Current message level"] == "0x00000007 (7) drv probe link"


def test_ethtool_unknown_speed_is_none():
    settings = parse_ethtool(real("network/ethtool-speed-unknown-virtual-nic-lxd-issue8669.txt"))

    assert settings.speed_mbps is None and settings.speed_raw == "Unknown!"
    assert settings.duplex is None
    assert settings.supported_link_modes == []


def test_ethtool_keeps_tool_warnings_apart():
    settings = parse_ethtool(real("network/ethtool-eth0-1GbE-node_exporter-fixture.txt"))

    assert settings.warnings == ["netlink error: Operation not permitted"]
    assert settings.port == "Twisted Pair" and "10000baseT/Full" in settings.supported_link_modes


def test_ethtool_driver_and_statistics():
    driver = parse_ethtool_driver(real("network/ethtool-i-mlx5-connectx4-ethq-issue8.txt"))
    stats = parse_ethtool_stats(real("network/ethtool-S-mlx5-connectx4-first-lines-partial-ethq-issue8.txt"))

    assert (driver.driver, driver.firmware_version, driver.bus_info) == (
        "mlx5_core",
        "14.23.1020 (MT_2420110034)",
        "0000:af:00.0",
    )
    assert driver.supports["statistics"] is True and driver.supports["eeprom-access"] is False
    assert len(stats.counters) == 23
    assert stats.counters["rx_bytes"] == 2195783498134 and stats.counters["tx_queue_stopped"] == 0


def test_ip_s_link_text_with_counters_and_carrier():
    links = parse_ip_link(real("network/ip-s-link-show-dgx-spark-gb10-mtu9000.txt")).by_name()

    assert links["enP7s7"].mtu == 9000 and links["enP7s7"].carrier is True
    assert links["enP7s7"].altnames == ["enP7p1s0"]
    assert links["enP7s7"].rx.bytes == 23651493
    assert links["enp1s0f0np0"].carrier is False and links["enp1s0f0np0"].state == "DOWN"
    assert links["veth5b4ba42"].master == "br-32d29ded7ce4"
    assert links["wlP9s9"].rx.dropped == 10703


def test_two_ip_link_invocations_in_one_file():
    links = parse_ip_link(real("network/ip-link-show-dgx-spark-cx7-mtu1500-two-invocations.txt")).links

    assert [(link.index, link.name, link.mtu, link.address) for link in links] == [
        (3, "enp1s0f0np0", 1500, "30:c5:99:3e:6a:13"),
        (4, "enp1s0f1np1", 1500, "30:c5:99:3e:6a:14"),
    ]


def test_ip_j_link_json():
    links = parse_ip_link(data("ip-j-link-invented.json")).by_name()

    assert links["ens1f0np0"].mtu == 9000 and links["ens1f0np0"].carrier is True
    assert links["ens1f0np0"].rx.dropped == 3 and links["ens1f0np0"].tx.bytes == 987654321
    assert links["ens1f1np1"].carrier is False
    assert links["lo"].rx is None


def test_netstat_i():
    report = parse_netstat_i(real("network/netstat-i-dgx-spark-gb10-mtu9000.txt"))
    interfaces = {item.name: item for item in report.interfaces}

    assert interfaces["enP7s7"].mtu == 9000
    assert interfaces["wlP9s9"].counters["RX-DRP"] == 10703
    assert interfaces["lo"].flags == "LRU"


def test_mlnx_qos_trust_dscp_pfc_on_priority_3():
    qos = parse_mlnx_qos(real("network/mlnx_qos-trust-dscp-pfc3-connectx-att-netarbiter.txt"))

    assert (qos.dcbx_mode, qos.trust, qos.cable_length) == ("OS controlled", "dscp", 7)
    assert qos.pfc_priorities == [3]
    assert qos.pfc_enabled == [False, False, False, True, False, False, False, False]
    assert qos.dscp_to_priority["3"] == [31, 30, 29, 28, 27, 26, 25, 24]
    assert [(tc.tc, tc.tsa, tc.priorities) for tc in qos.traffic_classes][:2] == [
        (0, "vendor", [1]),
        (1, "vendor", [0]),
    ]
    assert qos.to_dict()["pfc_priorities"] == [3]


def test_grepped_mlnx_qos_with_ecn_lines():
    qos = parse_mlnx_qos(real("network/spiderpool-set-rdma-qos-query-mlnx_qos-grep-partial.txt"))

    assert qos.pfc_priorities == [5] and qos.pfc_buffer == [0, 0, 0, 0, 0, 1, 0, 0]
    assert len(qos.ecn) == 16 and all(setting.enabled for setting in qos.ecn)
    assert qos.cnp_dscp == 48


@pytest.mark.parametrize(
    ("fixture", "unit", "average", "gbps", "qps", "link_type"),
    [
        (
            "network/ib_write_bw-dgx-spark-gb10-4qp-rdma_cm-report_gbits-gb10-training.txt",
            "Gb/sec",
            111.61,
            111.61,
            4,
            "IB",
        ),
        # perftest's MB is 2^20 bytes: 11032.34 MB/s * 1048576 * 8 = 92.546 Gb/s
        ("network/ib_write_bw-dgx-spark-gb10-roce-100g-single-link.txt", "MB/sec", 11032.34, 92.546, 1, "Ethernet"),
    ],
)
def test_ib_write_bw_reports(fixture, unit, average, gbps, qps, link_type):
    report = parse_ib_write_bw(real(fixture))

    assert report.test == "RDMA_Write BW Test" and report.device == "rocep1s0f0"
    assert (report.unit, report.qps, report.link_type) == (unit, qps, link_type)
    [row] = report.rows
    assert row.size_bytes == 65536 and row.bw_average == average
    assert report.bw_average_gbps == gbps


def test_not_network_output_is_rejected():
    lscpu = real("h200-1gpu/lscpu.txt")

    assert_parse_error(parse_ethtool, "", 1, "empty input")
    assert_parse_error(parse_ethtool, lscpu, 1, "Settings for <interface>:")
    assert_parse_error(parse_ethtool, "Settings for eth0:\n", 2, "end of input")
    assert_parse_error(parse_ethtool_driver, "driver mlx5\n", 1, "key: value")
    assert_parse_error(parse_ethtool_stats, "NIC statistics:\n     rx_packets: many\n", 2, "counter: number")
    assert_parse_error(parse_ip_link, lscpu, 1, "N: <name>: <FLAGS>")
    assert_parse_error(parse_ip_link, '[{"name": "eth0"}]', 1, "ifname")
    assert_parse_error(parse_netstat_i, lscpu, 1, "Iface MTU")
    assert_parse_error(parse_mlnx_qos, lscpu, 1, "Priority trust state")
    assert_parse_error(parse_ib_write_bw, lscpu, 1, "perftest report")


def test_malformed_rows_name_their_line():
    qos = "PFC configuration:\n        priority    0   1   2   3   4   5   6   7\n        enabled     0   0   1\n"
    ip_text = real("network/ip-s-link-show-dgx-spark-gb10-mtu9000.txt").replace("375328408  430504      0", "x y z", 1)

    assert_parse_error(parse_mlnx_qos, qos, 3, "8 per-priority values")
    assert_parse_error(parse_ip_link, ip_text, 4, "RX counters")
