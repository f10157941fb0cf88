"""InfiniBand/RoCE device state: ibstat, ibstatus, ibv_devinfo. All three give the same typed devices and ports."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, clean, incomplete, require_content, shorten, to_float, to_int, unexpected
from .errors import ParseError

# Port state spellings: 'Active', '4: ACTIVE', 'PORT_ACTIVE (4)' → 'ACTIVE'.
STATE_WORD = re.compile(r"(?:PORT_)?([A-Za-z_]+)")


def normalise_state(value: str | None) -> str | None:
    value = clean(value)
    if value is None:
        return None
    value = re.sub(r"^\d+:\s*", "", value)
    match = STATE_WORD.match(value)
    return match[1].upper() if match else value.upper()


def normalise_physical_state(value: str | None) -> str | None:
    """'5: LinkUp' → 'LinkUp'."""
    value = clean(value)
    return re.sub(r"^\d+:\s*", "", value) if value else None


@dataclass
class IbPort(Result):
    port: int
    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED, POLLING
    physical_state: str | None = None  # LinkUp, Disabled, Polling ...
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet
    lid: int | None = None
    sm_lid: int | None = None
    port_guid: str | None = None
    gid: str | None = None
    active_mtu: int | None = None
    max_mtu: int | None = None

    @property
    def is_up(self) -> bool:
        return self.state == "ACTIVE" and self.physical_state in (None, "LinkUp")


@dataclass
class IbDevice(Result):
    name: str
    ca_type: str | None = None
    firmware: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    vendor_part_id: str | None = None
    board_id: str | None = None
    ports: list[IbPort] = field(default_factory=list)
    ports_declared: int | None = None  # ibstat's 'Number of ports'


@dataclass
class IbReport(Result):
    source: str  # ibstat | ibstatus | ibv_devinfo
    devices: list[IbDevice]
    errors: list[str] = field(default_factory=list)

    def ports_down(self) -> list[tuple[str, int]]:
        return [(device.name, port.port) for device in self.devices for port in device.ports if not port.is_up]


def _key_value(line: str) -> tuple[str, str] | None:
    if ":" not in line:
        return None
    key, value = line.split(":", 1)
    return key.strip().lower(), value.strip()


# --- ibstat -----------------------------------------------------------------------------------------------------

CA_LINE = re.compile(r"^CA '([^']+)'\s*$")
PORT_LINE = re.compile(r"^Port (\d+):\s*$")
IBSTAT_DEVICE_FIELDS = {
    "ca type": "ca_type",
    "firmware version": "firmware",
    "node guid": "node_guid",
    "system image guid": "system_image_guid",
}


def parse_ibstat(text: str) -> IbReport:
    """ibstat. A run that ended in 'ibpanic:' keeps the devices it printed and reports the panic in ``errors``."""
    lines = require_content(text, "ibstat output")
    devices: list[IbDevice] = []
    errors: list[str] = []
    port: IbPort | None = None
    starts: list[int] = []  # the line of each device's "CA '<name>'"
    port_ended = True  # ibstat ends every port's block with its 'Link layer' line
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if match := CA_LINE.match(line):
            devices.append(IbDevice(name=match[1]))
            starts.append(number)
            port = None
        elif line.startswith(("ibpanic:", "ibwarn:")):
            errors.append(line)
        elif not devices:
            raise ParseError(f"expected ibstat output starting with \"CA '<device>'\", got {shorten(line)}", number)
        elif match := PORT_LINE.match(line):
            port = IbPort(port=int(match[1]))
            devices[-1].ports.append(port)
            port_ended = False
        elif pair := _key_value(line):
            _ibstat_field(devices[-1], port, *pair)
            port_ended = port_ended or (port is not None and pair[0] == "link layer")
    if not devices and not errors:
        raise unexpected(lines, "ibstat output starting with \"CA '<device>'\"")
    report = IbReport(source="ibstat", devices=devices, errors=errors)
    _require_whole_devices(lines, report, starts, port_ended)
    return report


def _require_whole_devices(lines: list[str], report: IbReport, starts: list[int], port_ended: bool) -> None:
    """Each CA declares its port count and each port block ends with 'Link layer'; ibstat cut inside a CA holds
    fewer ports, or a port without its last lines."""
    for device, start in zip(report.devices, starts, strict=True):
        if device.ports_declared is None and not device.ports and device is report.devices[-1] and not report.errors:
            raise incomplete(lines, f"CA '{device.name}' (line {start}) stops before its 'Number of ports'", report)
        if device.ports_declared is not None and len(device.ports) < device.ports_declared:
            raise incomplete(
                lines,
                f"CA '{device.name}' (line {start}) declares 'Number of ports: {device.ports_declared}', the "
                f"output holds {len(device.ports)} of them",
                report,
            )
    if not port_ended:
        device = report.devices[-1]
        raise incomplete(
            lines, f"port {device.ports[-1].port} of CA '{device.name}' stops before its 'Link layer' line", report
        )


def _ibstat_field(device: IbDevice, port: IbPort | None, key: str, value: str) -> None:
    if port is None:
        if key in IBSTAT_DEVICE_FIELDS:
            setattr(device, IBSTAT_DEVICE_FIELDS[key], clean(value))
        elif key == "number of ports":
            device.ports_declared = to_int(value)
        return
    if key == "state":
        port.state = normalise_state(value)
    elif key == "physical state":
        port.physical_state = normalise_physical_state(value)
    elif key == "rate":
        port.rate_gbps = to_float(value)
    elif key == "link layer":
        port.link_layer = clean(value)
    elif key == "base lid":
        port.lid = to_int(value)
    elif key == "sm lid":
        port.sm_lid = to_int(value)
    elif key == "port guid":
        port.port_guid = clean(value)


# --- ibstatus ---------------------------------------------------------------------------------------------------

IBSTATUS_TITLE = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:\s*$")


def parse_ibstatus(text: str) -> IbReport:
    lines = require_content(text, "ibstatus output")
    devices: dict[str, IbDevice] = {}
    port: IbPort | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if match := IBSTATUS_TITLE.match(line):
            device = devices.setdefault(match[1], IbDevice(name=match[1]))
            port = IbPort(port=int(match[2]))
            device.ports.append(port)
        elif port is None:
            raise ParseError(f"expected \"Infiniband device '<name>' port N status:\", got {shorten(line)}", number)
        elif pair := _key_value(line):
            _ibstatus_field(port, *pair)
    if not devices:
        raise unexpected(lines, "ibstatus output")
    return IbReport(source="ibstatus", devices=list(devices.values()))


def _ibstatus_field(port: IbPort, key: str, value: str) -> None:
    if key == "state":
        port.state = normalise_state(value)
    elif key == "phys state":
        port.physical_state = normalise_physical_state(value)
    elif key == "rate":
        port.rate_gbps = to_float(value)
    elif key == "link_layer":
        port.link_layer = clean(value)
    elif key == "base lid":
        port.lid = to_int(value)
    elif key == "sm lid":
        port.sm_lid = to_int(value)
    elif key == "default gid":
        port.gid = clean(value)


# --- ibv_devinfo ------------------------------------------------------------------------------------------------

HCA_LINE = re.compile(r"^hca_id:\s*(\S+)\s*$")
DEVINFO_DEVICE_FIELDS = {
    "fw_ver": "firmware",
    "node_guid": "node_guid",
    "sys_image_guid": "system_image_guid",
    "vendor_part_id": "vendor_part_id",
    "board_id": "board_id",
}


def parse_ibv_devinfo(text: str) -> IbReport:
    """ibv_devinfo (with or without -v); -v adds fields that are ignored here."""
    lines = require_content(text, "ibv_devinfo output")
    devices: list[IbDevice] = []
    port: IbPort | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if match := HCA_LINE.match(line):
            devices.append(IbDevice(name=match[1]))
            port = None
        elif not devices:
            raise ParseError(f"expected 'hca_id: <device>', got {shorten(line)}", number)
        elif (pair := _key_value(line)) and pair[0] == "port":
            port = IbPort(port=to_int(pair[1]) or 0)
            devices[-1].ports.append(port)
        elif pair:
            _devinfo_field(devices[-1], port, *pair)
    if not devices:
        raise unexpected(lines, "ibv_devinfo output ('hca_id: <device>')")
    return IbReport(source="ibv_devinfo", devices=devices)


def _devinfo_field(device: IbDevice, port: IbPort | None, key: str, value: str) -> None:
    if port is None:
        if key in DEVINFO_DEVICE_FIELDS:
            setattr(device, DEVINFO_DEVICE_FIELDS[key], clean(value))
        return
    if key == "state":
        port.state = normalise_state(value)
    elif key == "phys_state":
        port.physical_state = normalise_physical_state(re.sub(r"\s*\(\d+\)$", "", value))
    elif key == "link_layer":
        port.link_layer = clean(value)
    elif key == "port_lid":
        port.lid = to_int(value)
    elif key == "sm_lid":
        port.sm_lid = to_int(value)
    elif key == "active_mtu":
        port.active_mtu = to_int(value)
    elif key == "max_mtu":
        port.max_mtu = to_int(value)
