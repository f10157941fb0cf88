"""NIC state: ethtool (settings, -i, -S), ip link (JSON and text), netstat -i, mlnx_qos, perftest ib_write_bw."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .common import (
    Result,
    clean,
    end_of_input,
    load_json,
    require_content,
    shorten,
    to_bool,
    to_float,
    to_int,
    unexpected,
)
from .errors import ParseError

# --- ethtool <if> -----------------------------------------------------------------------------------------------


@dataclass
class EthtoolSettings(Result):
    interface: str | None
    speed_mbps: int | None  # None for 'Unknown!' (no link, or a virtual NIC)
    speed_raw: str | None
    duplex: str | None
    port: str | None
    auto_negotiation: bool | None
    link_detected: bool | None
    supported_link_modes: list[str] = field(default_factory=list)
    advertised_link_modes: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


SETTINGS_TITLE = re.compile(r"^Settings for (\S+?):\s*$")
SPEED = re.compile(r"^(\d+)\s*Mb/s$")


def parse_ethtool(text: str) -> EthtoolSettings:
    """`ethtool <interface>`; continuation lines (link modes, message level) join their field."""
    lines = require_content(text, "ethtool output")
    interface: str | None = None
    fields: dict[str, str] = {}
    warnings: list[str] = []
    last_key: str | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if match := SETTINGS_TITLE.match(stripped):
            interface = match[1]
        elif interface is None:
            continue
        elif not line[:1].isspace():  # tool warnings such as 'netlink error: ...' start at column 0
            warnings.append(stripped)
        elif ":" in stripped:
            last_key, value = (part.strip() for part in stripped.split(":", 1))
            fields[last_key] = value
        elif last_key is not None:
            fields[last_key] = f"{fields[last_key]} {stripped}".strip()
    if interface is None:
        raise unexpected(lines, "ethtool output starting with 'Settings for <interface>:'")
    if not fields:
        raise end_of_input(lines, "ethtool settings ('Speed: ...') after 'Settings for <interface>:'")
    return _ethtool_settings(interface, fields, warnings)


def _ethtool_settings(interface: str, fields: dict[str, str], warnings: list[str]) -> EthtoolSettings:
    speed = fields.get("Speed")
    speed_match = SPEED.match(speed or "")
    return EthtoolSettings(
        interface=interface,
        speed_mbps=int(speed_match[1]) if speed_match else None,
        speed_raw=speed,
        duplex=_known(fields.get("Duplex")),
        port=clean(fields.get("Port")),
        auto_negotiation=to_bool(fields.get("Auto-negotiation")),
        link_detected=to_bool(fields.get("Link detected")),
        supported_link_modes=_link_modes(fields.get("Supported link modes")),
        advertised_link_modes=_link_modes(fields.get("Advertised link modes")),
        fields=fields,
        warnings=warnings,
    )


def _known(value: str | None) -> str | None:
    value = clean(value)
    return None if value is None or value.startswith("Unknown") else value


def _link_modes(value: str | None) -> list[str]:
    if not value or value.strip() == "Not reported":
        return []
    return value.split()


# --- ethtool -i -------------------------------------------------------------------------------------------------


@dataclass
class EthtoolDriver(Result):
    driver: str
    version: str | None
    firmware_version: str | None
    bus_info: str | None
    expansion_rom_version: str | None = None
    supports: dict[str, bool | None] = field(default_factory=dict)


def parse_ethtool_driver(text: str) -> EthtoolDriver:
    """`ethtool -i <interface>`."""
    lines = require_content(text, "ethtool -i output")
    fields: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if ":" not in line:
            raise ParseError(f"expected 'key: value' lines of ethtool -i, got {shorten(line)}", number)
        key, value = line.split(":", 1)
        fields[key.strip()] = value.strip()
    if "driver" not in fields:
        raise unexpected(lines, "ethtool -i output ('driver: <name>')")
    return EthtoolDriver(
        driver=fields["driver"],
        version=clean(fields.get("version")),
        firmware_version=clean(fields.get("firmware-version")),
        bus_info=clean(fields.get("bus-info")),
        expansion_rom_version=clean(fields.get("expansion-rom-version")),
        supports={
            key[len("supports-") :]: to_bool(value) for key, value in fields.items() if key.startswith("supports-")
        },
    )


# --- ethtool -S -------------------------------------------------------------------------------------------------


@dataclass
class EthtoolStats(Result):
    counters: dict[str, int]


def parse_ethtool_stats(text: str) -> EthtoolStats:
    """`ethtool -S <interface>`."""
    lines = require_content(text, "ethtool -S output")
    counters: dict[str, int] = {}
    seen_title = False
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped == "NIC statistics:":
            seen_title = True
            continue
        key, _, value = stripped.rpartition(":")
        if not key or not value.strip().lstrip("-").isdigit():
            raise ParseError(f"expected 'counter: number', got {shorten(line)}", number)
        counters[key.strip()] = int(value)
    if not seen_title and not counters:
        raise unexpected(lines, "ethtool -S output ('NIC statistics:')")
    return EthtoolStats(counters=counters)


# --- ip link ----------------------------------------------------------------------------------------------------


@dataclass
class LinkStats(Result):
    bytes: int | None = None
    packets: int | None = None
    errors: int | None = None
    dropped: int | None = None


@dataclass
class IpLink(Result):
    index: int
    name: str
    flags: list[str]
    mtu: int | None
    state: str | None
    link_type: str | None = None
    address: str | None = None
    master: str | None = None
    qdisc: str | None = None
    altnames: list[str] = field(default_factory=list)
    rx: LinkStats | None = None
    tx: LinkStats | None = None

    @property
    def carrier(self) -> bool:
        return "NO-CARRIER" not in self.flags and ("LOWER_UP" in self.flags or self.state == "UP")


@dataclass
class IpLinks(Result):
    links: list[IpLink]

    def by_name(self) -> dict[str, IpLink]:
        return {link.name: link for link in self.links}


def parse_ip_link(text: str) -> IpLinks:
    """`ip -j link` (JSON) or `ip [-s] link show` (text)."""
    if text.lstrip().startswith("["):
        return parse_ip_link_json(text)
    return parse_ip_link_text(text)


def parse_ip_link_json(text: str) -> IpLinks:
    data = load_json(text, "ip -j link JSON")
    if not isinstance(data, list) or not all(isinstance(item, dict) and "ifname" in item for item in data):
        raise ParseError("expected a JSON list of interfaces with 'ifname' (ip -j link)", line=1)
    return IpLinks(links=[_json_link(item) for item in data])


def _json_link(item: dict[str, Any]) -> IpLink:
    stats = item.get("stats64") or item.get("stats") or {}
    return IpLink(
        index=int(item.get("ifindex", 0)),
        name=str(item["ifname"]),
        flags=list(item.get("flags") or []),
        mtu=to_int(item.get("mtu")),
        state=item.get("operstate"),
        link_type=item.get("link_type"),
        address=item.get("address"),
        master=item.get("master"),
        qdisc=item.get("qdisc"),
        altnames=list(item.get("altnames") or []),
        rx=_json_stats(stats.get("rx")),
        tx=_json_stats(stats.get("tx")),
    )


def _json_stats(stats: dict[str, Any] | None) -> LinkStats | None:
    if not stats:
        return None
    return LinkStats(
        bytes=to_int(stats.get("bytes")),
        packets=to_int(stats.get("packets")),
        errors=to_int(stats.get("errors")),
        dropped=to_int(stats.get("dropped")),
    )


LINK_TITLE = re.compile(r"^(\d+):\s+([^:@\s]+)(?:@(\S+))?:\s+<([^>]*)>\s*(.*)$")
LINK_LAYER = re.compile(r"^link/(\S+)(?:\s+(\S+))?")


def parse_ip_link_text(text: str) -> IpLinks:
    lines = require_content(text, "ip link output")
    links: list[IpLink] = []
    pending_stats: tuple[str, list[str]] | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if match := LINK_TITLE.match(line):
            links.append(_text_link(match))
        elif not links:
            raise ParseError(f"expected 'N: <name>: <FLAGS> mtu ...', got {shorten(line)}", number)
        elif pending_stats is not None:
            _apply_stats(links[-1], pending_stats, line.split(), number)
            pending_stats = None
        elif line.startswith(("RX:", "TX:")):
            pending_stats = (line[:2], line[3:].split())
        elif match := LINK_LAYER.match(line):
            links[-1].link_type, links[-1].address = match[1], match[2]
        elif line.startswith("altname "):
            links[-1].altnames.append(line.split()[1])
    if not links:
        raise unexpected(lines, "ip link output")
    return IpLinks(links=links)


def _text_link(match: re.Match) -> IpLink:
    attributes = _word_pairs(match[5].split())
    return IpLink(
        index=int(match[1]),
        name=match[2],
        flags=[flag for flag in match[4].split(",") if flag],
        mtu=to_int(attributes.get("mtu")),
        state=attributes.get("state"),
        master=attributes.get("master"),
        qdisc=attributes.get("qdisc"),
    )


def _word_pairs(words: list[str]) -> dict[str, str]:
    return {words[i]: words[i + 1] for i in range(0, len(words) - 1, 2)}


def _apply_stats(link: IpLink, pending: tuple[str, list[str]], values: list[str], number: int) -> None:
    direction, names = pending
    if len(values) != len(names) or not all(value.isdigit() for value in values):
        raise ParseError(f"expected {len(names)} {direction} counters, got {shorten(' '.join(values))}", number)
    counters = dict(zip(names, (int(value) for value in values), strict=True))
    stats = LinkStats(
        bytes=counters.get("bytes"),
        packets=counters.get("packets"),
        errors=counters.get("errors"),
        dropped=counters.get("dropped"),
    )
    if direction == "RX":
        link.rx = stats
    else:
        link.tx = stats


# --- netstat -i -------------------------------------------------------------------------------------------------


@dataclass
class NetstatInterface(Result):
    name: str
    mtu: int | None
    counters: dict[str, int]
    flags: str | None


@dataclass
class NetstatInterfaces(Result):
    interfaces: list[NetstatInterface]


def parse_netstat_i(text: str) -> NetstatInterfaces:
    lines = require_content(text, "netstat -i output")
    header_index = next((i for i, line in enumerate(lines) if line.split()[:2] == ["Iface", "MTU"]), None)
    if header_index is None:
        raise unexpected(lines, "the netstat -i header 'Iface MTU ...'")
    columns = lines[header_index].split()
    interfaces: list[NetstatInterface] = []
    for number, line in enumerate(lines[header_index + 1 :], start=header_index + 2):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) not in (len(columns), len(columns) - 1):  # Flg can be empty
            raise ParseError(f"expected {len(columns)} netstat -i columns, got {len(tokens)}", number)
        values = dict(zip(columns, tokens, strict=False))
        interfaces.append(
            NetstatInterface(
                name=values["Iface"],
                mtu=to_int(values.get("MTU")),
                counters={key: int(value) for key, value in values.items() if key.startswith(("RX", "TX"))},
                flags=values.get("Flg"),
            )
        )
    return NetstatInterfaces(interfaces=interfaces)


# --- mlnx_qos ---------------------------------------------------------------------------------------------------


@dataclass
class TrafficClass(Result):
    tc: int
    ratelimit: str | None
    tsa: str | None
    bandwidth_pct: int | None
    priorities: list[int] = field(default_factory=list)


@dataclass
class EcnSetting(Result):
    priority: int
    point: str  # roce_np (notification point) | roce_rp (reaction point)
    enabled: bool


@dataclass
class MlnxQos(Result):
    """mlnx_qos -i <if>: trust mode, PFC per priority 0-7, DSCP map, ETS traffic classes, ECN lines if grep'd in."""

    dcbx_mode: str | None
    trust: str | None
    pfc_enabled: list[bool]
    pfc_buffer: list[int]
    dscp_to_priority: dict[str, list[int]]
    traffic_classes: list[TrafficClass]
    cable_length: int | None = None
    ecn: list[EcnSetting] = field(default_factory=list)
    cnp_dscp: int | None = None

    @property
    def pfc_priorities(self) -> list[int]:
        return [priority for priority, enabled in enumerate(self.pfc_enabled) if enabled]

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["pfc_priorities"] = self.pfc_priorities
        return data


TC_LINE = re.compile(r"^tc:\s*(\d+)\s+ratelimit:\s*([^,]+),\s*tsa:\s*(\w+)(?:,\s*bw:\s*(\d+)%)?")
DSCP_LINE = re.compile(r"^prio:\s*(\d+)\s+dscp:\s*([\d,]+)")
ECN_LINE = re.compile(r"^ECN Enabled for priority (\d+): \S*/(roce_np|roce_rp)/enable/\d+ = (\d)")
CNP_LINE = re.compile(r"^QOS for CNP: \S+ = (\d+)")


def parse_mlnx_qos(text: str) -> MlnxQos:
    lines = require_content(text, "mlnx_qos output")
    qos = MlnxQos(dcbx_mode=None, trust=None, pfc_enabled=[], pfc_buffer=[], dscp_to_priority={}, traffic_classes=[])
    recognised = False
    for number, raw in enumerate(lines, start=1):
        recognised = _read_qos_line(qos, raw.strip(), number) or recognised
    if not recognised:
        raise unexpected(lines, "mlnx_qos output ('Priority trust state:' or 'PFC configuration:')")
    return qos


def _read_qos_line(qos: MlnxQos, line: str, number: int) -> bool:
    """Read one line; True when it is one mlnx_qos prints."""
    if line.startswith("DCBX mode:"):
        qos.dcbx_mode = line.split(":", 1)[1].strip()
    elif line.startswith("Priority trust state:"):
        qos.trust = line.split(":", 1)[1].strip()
    elif line.startswith("Cable len:"):
        qos.cable_length = to_int(line.split(":", 1)[1])
    elif line.startswith("enabled ") or line.startswith("buffer "):
        _read_pfc_row(qos, line, number)
    elif match := DSCP_LINE.match(line):
        qos.dscp_to_priority[match[1]] = [int(value) for value in match[2].split(",") if value]
    elif match := TC_LINE.match(line):
        qos.traffic_classes.append(
            TrafficClass(tc=int(match[1]), ratelimit=match[2].strip(), tsa=match[3], bandwidth_pct=to_int(match[4]))
        )
    elif line.startswith("priority:") and qos.traffic_classes:
        qos.traffic_classes[-1].priorities += [int(value) for value in line.split(":", 1)[1].split()]
    elif match := ECN_LINE.match(line):
        qos.ecn.append(EcnSetting(priority=int(match[1]), point=match[2], enabled=match[3] == "1"))
    elif match := CNP_LINE.match(line):
        qos.cnp_dscp = int(match[1])
    else:
        return line.startswith(("PFC configuration", "dscp2prio", "priority "))
    return True


def _read_pfc_row(qos: MlnxQos, line: str, number: int) -> None:
    name, *values = line.split()
    if len(values) != 8 or not all(value.isdigit() for value in values):
        raise ParseError(f"expected 8 per-priority values in the PFC '{name}' row, got {shorten(line)}", number)
    if name == "enabled":
        qos.pfc_enabled = [value == "1" for value in values]
    else:
        qos.pfc_buffer = [int(value) for value in values]


# --- ib_write_bw ------------------------------------------------------------------------------------------------


@dataclass
class BandwidthRow(Result):
    size_bytes: int
    iterations: int
    bw_peak: float | None
    bw_average: float | None
    msg_rate_mpps: float | None
    bw_average_gbps: float | None


@dataclass
class PerftestReport(Result):
    test: str | None
    device: str | None
    link_type: str | None
    qps: int | None
    mtu: str | None
    unit: str | None  # 'Gb/sec' or 'MB/sec', as printed
    rows: list[BandwidthRow]
    settings: dict[str, str]

    @property
    def bw_average_gbps(self) -> float | None:
        values = [row.bw_average_gbps for row in self.rows if row.bw_average_gbps is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["bw_average_gbps"] = self.bw_average_gbps
        return data


PERFTEST_TITLE = re.compile(r"^(\S.*\b(?:BW|Lat(?:ency)?) Test)\s*$")
PERFTEST_SETTING = re.compile(r"([A-Za-z][\w*. /-]*?)\s*:\s*(\S+(?:\[\w+\])?)")
RESULT_HEADER = re.compile(r"^#bytes\s+#iterations\s+BW peak\[([^\]]+)\]")
MEBIBYTE_BITS = 1048576 * 8  # perftest's MB/sec is 2^20 bytes per second


def parse_ib_write_bw(text: str) -> PerftestReport:
    """perftest bandwidth reports (ib_write_bw, ib_read_bw, ib_send_bw), client or server side."""
    lines = require_content(text, "an ib_write_bw report")
    title = next((m[1].strip() for line in lines if (m := PERFTEST_TITLE.match(line.strip()))), None)
    settings: dict[str, str] = {}
    unit: str | None = None
    rows: list[BandwidthRow] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if match := RESULT_HEADER.match(line):
            unit = match[1]
        elif unit is not None and line[:1].isdigit():
            rows.append(_bandwidth_row(line, unit, number))
        elif unit is None and ":" in line and not line.startswith(("local address", "remote address", "GID")):
            settings.update((key.strip(), value.strip()) for key, value in PERFTEST_SETTING.findall(line))
    if title is None and unit is None:
        raise unexpected(lines, "a perftest report ('RDMA_Write BW Test' and a '#bytes #iterations' table)")
    return PerftestReport(
        test=title,
        device=settings.get("Device"),
        link_type=settings.get("Link type"),
        qps=to_int(settings.get("Number of qps")),
        mtu=settings.get("Mtu"),
        unit=unit,
        rows=rows,
        settings=settings,
    )


def _bandwidth_row(line: str, unit: str, number: int) -> BandwidthRow:
    tokens = line.split()
    if len(tokens) < 4:
        raise ParseError(f"expected '#bytes #iterations BW-peak BW-average MsgRate', got {shorten(line)}", number)
    average = to_float(tokens[3])
    return BandwidthRow(
        size_bytes=int(tokens[0]),
        iterations=int(tokens[1]),
        bw_peak=to_float(tokens[2]),
        bw_average=average,
        msg_rate_mpps=to_float(tokens[4]) if len(tokens) > 4 else None,
        bw_average_gbps=_to_gbps(average, unit),
    )


def _to_gbps(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    if unit.lower().startswith("gb"):
        return value
    if unit.lower().startswith("mb"):
        return round(value * MEBIBYTE_BITS / 1e9, 3)
    return None
