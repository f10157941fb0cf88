"""NCCL debug logs (NCCL_DEBUG=INFO/WARN): version, transports, interfaces, rings/trees, classified warnings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, require_content, strip_ansi, strip_launcher_prefix, unexpected

NCCL_LINE = re.compile(
    r"^(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] )?"
    r"(?:(?P<source>\S+) )?NCCL (?P<level>INFO|WARN|TRACE) (?P<message>.*)$"
)
NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(\S*)")
VIA = re.compile(r"\bvia (.+?)\s*$")
USING_NETWORK = re.compile(r"^Using network (.+?)\s*$")
SOCKET_INTERFACE = re.compile(r"\[(\d+)\]([^\s:\[]+):(\S+?)<\d+>")
IB_INTERFACE = re.compile(r"\[(\d+)\]([^\s:\[]+):(\d+)/(IB|RoCE)")
BOOTSTRAP_INTERFACE = re.compile(r"^Bootstrap\s*: Using ([^\s:]+):(\S+?)<\d+>")
OOB_INTERFACE = re.compile(r"OOB ([^\s:]+):(\S+?)<\d+>")
CHANNEL_TOTAL = re.compile(r"^Channel \d+/(\d+) :")
COLL_CHANNELS = re.compile(r"^(\d+) coll channels")
RING_LINE = re.compile(r"^(?:Ring|Channel) \d+(?:/\d+)? :")
RANKS = re.compile(r"nRanks (\d+) nNodes (\d+)")

# First match wins. IB/RoCE before CUDA and sockets: 'completion with error 12' is the fabric's fault.
WARNING_CATEGORIES = (
    ("ib_roce", re.compile(r"NET/IB|ibv_|\bIB\b|RoCE|mlx5|status=12|error 12|\bGID\b|verbs", re.IGNORECASE)),
    ("cuda", re.compile(r"\bcuda|\bcu[A-Z]\w+|illegal memory access", re.IGNORECASE)),
    (
        "bootstrap",
        re.compile(r"bootstrap|socket|no interface|interface found|connect|refused|getifaddrs", re.IGNORECASE),
    ),
    ("timeout", re.compile(r"time ?out|timed out|watchdog", re.IGNORECASE)),
    ("internal_error", re.compile(r"internal error|ncclInternalError", re.IGNORECASE)),
    (
        "system",
        re.compile(
            r"system error|ncclSystemError|no space|/dev/shm|\bshm|cannot allocate|errno|mmap|open", re.IGNORECASE
        ),
    ),
)


def socket_ifname_selects(spec: str, names: list[str]) -> list[str]:
    """The interfaces NCCL_SOCKET_IFNAME selects among `names`, as NCCL reads it: a comma list of name prefixes,
    '^' in front excludes them, '=' in front (after any '^') makes them exact names, ':port' is ignored here."""
    exclude = spec.startswith("^")
    text = spec[1:] if exclude else spec
    exact = text.startswith("=")
    text = text[1:] if exact else text
    patterns = [pattern.split(":")[0] for pattern in text.split(",") if pattern]

    def selected(name: str) -> bool:
        return any(name == pattern if exact else name.startswith(pattern) for pattern in patterns)

    return [name for name in names if selected(name) != exclude]


def classify_warning(message: str) -> str:
    """The runbook category of an NCCL WARN message."""
    for category, pattern in WARNING_CATEGORIES:
        if pattern.search(message):
            return category
    return "other"


@dataclass
class NcclWarning(Result):
    category: str
    message: str
    line: int
    host: str | None = None
    source: str | None = None


@dataclass
class NcclInterface(Result):
    role: str  # bootstrap | socket | ib | oob
    name: str
    address: str | None = None
    port: int | None = None
    link_layer: str | None = None


@dataclass
class NcclLog(Result):
    nccl_version: str | None
    hosts: list[str]
    networks: list[str]
    transports: list[str]
    gdr_enabled: bool | None
    interfaces: list[NcclInterface]
    channels: int | None
    ring_connections: int
    trees: list[str]
    nranks: int | None
    nnodes: int | None
    warnings: list[NcclWarning]
    info_lines: int = 0


@dataclass
class _State:
    version: str | None = None
    hosts: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    transports: set[str] = field(default_factory=set)
    gdr: set[bool] = field(default_factory=set)
    interfaces: list[NcclInterface] = field(default_factory=list)
    channels: int | None = None
    ring_connections: int = 0
    trees: list[str] = field(default_factory=list)
    nranks: int | None = None
    nnodes: int | None = None
    warnings: list[NcclWarning] = field(default_factory=list)
    info_lines: int = 0


def parse_nccl_log(text: str) -> NcclLog:
    lines = require_content(text, "an NCCL debug log")
    state = _State()
    for number, raw in enumerate(lines, start=1):
        line = strip_launcher_prefix(strip_ansi(raw)).rstrip()
        if match := NCCL_LINE.match(line.strip()):
            _read_nccl_line(state, match, number)
        elif version := NCCL_VERSION.search(line):
            state.version = state.version or version[1]
    if not state.info_lines and not state.warnings and state.version is None:
        raise unexpected(lines, "NCCL debug lines ('<host>:<pid>:<tid> [<dev>] NCCL INFO|WARN ...')")
    return NcclLog(
        nccl_version=state.version,
        hosts=state.hosts,
        networks=state.networks,
        transports=sorted(state.transports),
        gdr_enabled=None if not state.gdr else True in state.gdr,
        interfaces=state.interfaces,
        channels=state.channels,
        ring_connections=state.ring_connections,
        trees=state.trees,
        nranks=state.nranks,
        nnodes=state.nnodes,
        warnings=state.warnings,
        info_lines=state.info_lines,
    )


def _read_nccl_line(state: _State, match: re.Match, number: int) -> None:
    host, message = match["host"], match["message"].strip()
    if host and host not in state.hosts:
        state.hosts.append(host)
    if match["level"] == "WARN":
        state.warnings.append(
            NcclWarning(
                category=classify_warning(message), message=message, line=number, host=host, source=match["source"]
            )
        )
        return
    state.info_lines += 1
    _read_info(state, message)


def _read_info(state: _State, message: str) -> None:
    if version := NCCL_VERSION.search(message):
        state.version = state.version or version[1]
    if (network := USING_NETWORK.match(message)) and network[1] not in state.networks:
        state.networks.append(network[1])
    if "GPU Direct RDMA Enabled" in message:
        state.gdr.add(True)
    elif "GPU Direct RDMA Disabled" in message:
        state.gdr.add(False)
    if RING_LINE.match(message):
        _read_ring(state, message)
    elif message.startswith("Trees "):
        state.trees.append(message[len("Trees ") :].strip())
    elif channels := COLL_CHANNELS.match(message):
        state.channels = max(state.channels or 0, int(channels[1]))
    if ranks := RANKS.search(message):
        state.nranks, state.nnodes = int(ranks[1]), int(ranks[2])
    _read_interfaces(state, message)


def _read_ring(state: _State, message: str) -> None:
    if total := CHANNEL_TOTAL.match(message):
        state.channels = max(state.channels or 0, int(total[1]))
    if via := VIA.search(message):
        state.ring_connections += 1
        kind, gdr = transport_kind(via[1])
        state.transports.add(kind)
        if gdr:
            state.gdr.add(True)


def transport_kind(via: str) -> tuple[str, bool]:
    """'NET/IB/0/GDRDMA' → ('NET/IB', True); 'P2P/IPC/read' → ('P2P/IPC', False); 'SHM/direct' → ('SHM', False)."""
    parts = via.split("/")
    gdr = "GDRDMA" in parts
    if parts[0] in ("NET", "P2P", "COLLNET") and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}", gdr
    return parts[0], gdr


def _read_interfaces(state: _State, message: str) -> None:
    found: list[NcclInterface] = []
    if bootstrap := BOOTSTRAP_INTERFACE.match(message):
        found.append(NcclInterface(role="bootstrap", name=bootstrap[1], address=bootstrap[2]))
    elif message.startswith("NET/IB") and "Using" in message:
        found += [
            NcclInterface(role="ib", name=m[2], port=int(m[3]), link_layer=m[4]) for m in IB_INTERFACE.finditer(message)
        ]
        found += [NcclInterface(role="oob", name=m[1], address=m[2]) for m in OOB_INTERFACE.finditer(message)]
    elif message.startswith("NET/Socket") and "Using" in message:
        found += [NcclInterface(role="socket", name=m[2], address=m[3]) for m in SOCKET_INTERFACE.finditer(message)]
    for interface in found:
        if interface not in state.interfaces:
            state.interfaces.append(interface)
