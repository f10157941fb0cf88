"""Host facts: lscpu (text and -J), numactl -H, lsblk -J, /proc/meminfo, and interface MTU/speed from sysfs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .common import (
    Result,
    clean,
    load_json,
    parse_id_list,
    require_content,
    require_dict,
    shorten,
    to_bool,
    to_int,
    unexpected,
)
from .errors import ParseError

# --- lscpu ------------------------------------------------------------------------------------------------------


@dataclass
class CpuInfo(Result):
    architecture: str | None
    model_name: str | None
    vendor: str | None
    cpus: int | None
    online_cpus: list[int] | None
    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None
    numa_nodes: int | None
    numa_node_cpus: dict[str, list[int] | None]
    hypervisor: str | None
    flags: list[str]
    fields: dict[str, str]


LSCPU_LINE = re.compile(r"^\s*([^:]+?):\s*(.*)$")
NUMA_NODE_KEY = re.compile(r"^NUMA node(\d+) CPU\(s\)$")


def parse_lscpu(text: str) -> CpuInfo:
    """lscpu, or lscpu -J."""
    if text.lstrip().startswith("{"):
        return parse_lscpu_json(text)
    lines = require_content(text, "lscpu output")
    fields: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        match = LSCPU_LINE.match(line)
        if not match:
            raise ParseError(f"expected 'Field: value' lines of lscpu, got {shorten(line)}", number)
        if match[2]:  # section titles such as 'Caches (sum of all):' carry no value
            fields[match[1].strip()] = match[2].strip()
    return _cpu_info(fields, lines)


def parse_lscpu_json(text: str) -> CpuInfo:
    data = require_dict(load_json(text, "lscpu -J JSON"), "lscpu -J JSON")
    if not isinstance(data.get("lscpu"), list):
        raise ParseError("expected an 'lscpu' list in the JSON (lscpu -J)", line=1)
    fields: dict[str, str] = {}
    _flatten_lscpu(data["lscpu"], fields)
    return _cpu_info(fields, [text])


def _flatten_lscpu(entries: list[Any], fields: dict[str, str]) -> None:
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("field", "")).strip().rstrip(":")
        if entry.get("data") not in (None, ""):
            fields[name] = str(entry["data"]).strip()
        _flatten_lscpu(entry.get("children") or [], fields)


def _cpu_info(fields: dict[str, str], lines: list[str]) -> CpuInfo:
    if "Architecture" not in fields and "CPU(s)" not in fields:
        raise unexpected(lines, "lscpu output ('Architecture:' and 'CPU(s):')")
    numa_cpus = {match[1]: parse_id_list(value) for key, value in fields.items() if (match := NUMA_NODE_KEY.match(key))}
    return CpuInfo(
        architecture=fields.get("Architecture"),
        model_name=fields.get("Model name"),
        vendor=fields.get("Vendor ID"),
        cpus=to_int(fields.get("CPU(s)")),
        online_cpus=parse_id_list(fields.get("On-line CPU(s) list")),
        sockets=to_int(fields.get("Socket(s)")),
        cores_per_socket=to_int(fields.get("Core(s) per socket")),
        threads_per_core=to_int(fields.get("Thread(s) per core")),
        numa_nodes=to_int(fields.get("NUMA node(s)")),
        numa_node_cpus=numa_cpus,
        hypervisor=fields.get("Hypervisor vendor"),
        flags=(fields.get("Flags") or "").split(),
        fields=fields,
    )


# --- numactl -H -------------------------------------------------------------------------------------------------


@dataclass
class NumaNode(Result):
    node: int
    cpus: list[int] = field(default_factory=list)
    size_mb: int | None = None
    free_mb: int | None = None


@dataclass
class NumaTopology(Result):
    nodes: list[NumaNode]
    distances: list[list[int]]


NUMA_AVAILABLE = re.compile(r"^available: (\d+) nodes")
NUMA_NODE_LINE = re.compile(r"^node (\d+) (cpus|size|free):\s*(.*)$")
DISTANCE_ROW = re.compile(r"^\s*(\d+):\s+([\d\s]+)$")


def parse_numactl(text: str) -> NumaTopology:
    """numactl -H / --hardware."""
    lines = require_content(text, "numactl -H output")
    if not any(NUMA_AVAILABLE.match(line.strip()) for line in lines):
        raise unexpected(lines, "numactl -H output ('available: N nodes (...)')")
    nodes: dict[int, NumaNode] = {}
    distances: list[list[int]] = []
    for line in lines:
        if match := NUMA_NODE_LINE.match(line.strip()):
            node = nodes.setdefault(int(match[1]), NumaNode(node=int(match[1])))
            _numa_field(node, match[2], match[3])
        elif match := DISTANCE_ROW.match(line):
            distances.append([int(value) for value in match[2].split()])
    return NumaTopology(nodes=[nodes[key] for key in sorted(nodes)], distances=distances)


def _numa_field(node: NumaNode, key: str, value: str) -> None:
    if key == "cpus":
        node.cpus = [int(cpu) for cpu in value.split()]
    elif key == "size":
        node.size_mb = to_int(value)
    else:
        node.free_mb = to_int(value)


# --- lsblk -J ---------------------------------------------------------------------------------------------------


@dataclass
class BlockDevice(Result):
    name: str
    type: str | None
    size_bytes: int | None  # None when lsblk ran without -b (human sizes are kept in size)
    size: str | None
    model: str | None
    rotational: bool | None
    transport: str | None
    mountpoints: list[str]
    children: list[BlockDevice] = field(default_factory=list)


@dataclass
class BlockDevices(Result):
    devices: list[BlockDevice]


def parse_lsblk(text: str) -> BlockDevices:
    """lsblk -J (best with -b for sizes in bytes)."""
    data = require_dict(load_json(text, "lsblk -J JSON"), "lsblk -J JSON")
    if not isinstance(data.get("blockdevices"), list):
        raise ParseError("expected a 'blockdevices' list in the JSON (lsblk -J)", line=1)
    return BlockDevices(devices=[_block_device(item) for item in data["blockdevices"] if isinstance(item, dict)])


def _block_device(item: dict[str, Any]) -> BlockDevice:
    size = item.get("size")
    mounts = item.get("mountpoints") if "mountpoints" in item else [item.get("mountpoint")]
    return BlockDevice(
        name=str(item.get("name", "")),
        type=item.get("type"),
        size_bytes=_byte_count(size),
        size=None if size is None else str(size),
        model=clean(item.get("model")),
        rotational=to_bool(item.get("rota")),
        transport=item.get("tran"),
        mountpoints=[mount for mount in mounts or [] if mount],
        children=[_block_device(child) for child in item.get("children") or [] if isinstance(child, dict)],
    )


def _byte_count(size: Any) -> int | None:
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    return int(size) if isinstance(size, str) and size.isdigit() else None


# --- /proc/meminfo ----------------------------------------------------------------------------------------------


@dataclass
class MemInfo(Result):
    mem_total_kib: int
    mem_available_kib: int | None
    hugepages_total: int | None
    hugepage_size_kib: int | None
    values: dict[str, int]


MEMINFO_LINE = re.compile(r"^([\w()]+):\s+(\d+)(?: kB)?\s*$")


def parse_meminfo(text: str) -> MemInfo:
    lines = require_content(text, "/proc/meminfo")
    values: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        match = MEMINFO_LINE.match(line.strip())
        if not match:
            raise ParseError(f"expected '/proc/meminfo' lines such as 'MemTotal: 1024 kB', got {shorten(line)}", number)
        values[match[1]] = int(match[2])
    if "MemTotal" not in values:
        raise unexpected(lines, "/proc/meminfo with a 'MemTotal:' line")
    return MemInfo(
        mem_total_kib=values["MemTotal"],
        mem_available_kib=values.get("MemAvailable"),
        hugepages_total=values.get("HugePages_Total"),
        hugepage_size_kib=values.get("Hugepagesize"),
        values=values,
    )


# --- interface MTU and speed from /sys/class/net ----------------------------------------------------------------


@dataclass
class NetInterface(Result):
    name: str
    mtu: int
    speed_mbps: int | None  # sysfs says -1 (or nothing) when the speed is unknown


@dataclass
class NetInterfaces(Result):
    interfaces: list[NetInterface]

    def by_name(self) -> dict[str, NetInterface]:
        return {interface.name: interface for interface in self.interfaces}


SYSFS_LINE = re.compile(r"^(\S+)\s+(\d+)(?:\s+(-?\d+))?\s*$")


def parse_net_mtu_speed(text: str) -> NetInterfaces:
    """Lines of '<interface> <mtu> [<speed>]' read from /sys/class/net/*/{mtu,speed}."""
    lines = require_content(text, "'<interface> <mtu> [<speed>]' lines")
    interfaces: list[NetInterface] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        match = SYSFS_LINE.match(line.strip())
        if not match:
            raise ParseError(f"expected '<interface> <mtu> [<speed>]', got {shorten(line)}", number)
        speed = to_int(match[3])
        interfaces.append(
            NetInterface(name=match[1], mtu=int(match[2]), speed_mbps=speed if speed and speed > 0 else None)
        )
    return NetInterfaces(interfaces=interfaces)
