"""Kernel logs (dmesg, dmesg -T, journalctl -k): NVIDIA Xid events with their meaning."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from .common import Result, clean, require_content, unexpected

# Common Xids and what they mean (NVIDIA "Xid Errors" catalogue); kind says where to look first.
XID_MEANINGS: dict[int, tuple[str, str]] = {
    13: ("Graphics engine exception", "application"),
    31: ("GPU memory page fault", "application"),
    32: ("Invalid or corrupted push buffer stream", "driver"),
    38: ("Driver firmware error", "driver"),
    43: ("GPU stopped processing", "application"),
    45: ("Preemptive cleanup, due to previous errors", "application"),
    48: ("Double-bit ECC error", "memory"),
    54: ("Auxiliary power is not connected to the GPU", "hardware"),
    56: ("Display engine error", "driver"),
    57: ("Error programming video memory interface", "hardware"),
    58: ("Unstable video memory interface detected", "hardware"),
    61: ("Internal micro-controller breakpoint/warning", "driver"),
    62: ("Internal micro-controller halt", "hardware"),
    63: ("ECC page retirement or row remapping recording event", "memory"),
    64: ("ECC page retirement or row remapper recording failure", "memory"),
    68: ("Video processor exception", "driver"),
    69: ("Graphics engine class error", "application"),
    74: ("NVLink error", "nvlink"),
    79: ("GPU has fallen off the bus", "hardware"),
    92: ("High single-bit ECC error rate", "memory"),
    94: ("Contained ECC error", "memory"),
    95: ("Uncontained ECC error", "memory"),
    109: ("Context switch timeout error", "application"),
    110: ("Security fault error", "hardware"),
    119: ("GSP RPC timeout", "driver"),
    120: ("GSP error", "driver"),
    121: ("C2C link error", "hardware"),
    140: ("Unrecovered ECC error", "memory"),
    154: ("GPU recovery action changed", "driver"),
}

XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)"
    r"(?:, pid=(?P<pid>[^,]*))?(?:, name=(?P<name>[^,]*))?(?:, (?P<message>.*))?$"
)
GPU_AT = re.compile(r"NVRM: GPU at PCI:(?P<pci>[0-9A-Fa-f:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
TIMESTAMP = re.compile(r"^\[\s*(?P<stamp>[^\]]+)\]\s*")
# dmesg, dmesg -T, syslog/journalctl, and raw /dev/kmsg priorities. '[12.3] [' is UCX, not the kernel.
KERNEL_LINE = re.compile(
    r"^(?:\[\s*\d+\.\d+\] (?!\[)|\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]|<\d+>"
    r"|\w{3} +\d+ [\d:]+ \S+ kernel:|\d{4}-\d\d-\d\dT\S+ \S+ kernel:|\d{4}-\d\d-\d\dT[\d:]+,\d{6}[+-])"
)


def xid_meaning(xid: int) -> str | None:
    entry = XID_MEANINGS.get(xid)
    return entry[0] if entry else None


@dataclass
class XidEvent(Result):
    xid: int
    pci_bus_id: str
    pid: int | None
    process: str | None
    message: str | None
    meaning: str | None
    kind: str | None
    timestamp: str | None
    line: int
    gpu_uuid: str | None = None


@dataclass
class KernelLog(Result):
    xids: list[XidEvent]
    xid_counts: dict[str, int]
    gpus: dict[str, str] = field(default_factory=dict)  # PCI bus id → GPU UUID, from 'NVRM: GPU at PCI:...'
    lines: int = 0


def parse_dmesg(text: str) -> KernelLog:
    lines = require_content(text, "a kernel log (dmesg)")
    first = next(line for line in lines if line.strip())
    if not KERNEL_LINE.match(first) and not any("NVRM:" in line for line in lines):
        raise unexpected(lines, "kernel log lines such as '[  12.345678] ...' or '[Mon Jan  1 00:00:00 2025] ...'")
    gpus: dict[str, str] = {}
    events: list[XidEvent] = []
    for number, line in enumerate(lines, start=1):
        if match := GPU_AT.search(line):
            gpus[match["pci"].lower()] = match["uuid"]
        elif match := XID_LINE.search(line):
            events.append(_xid_event(match, line, number))
    for event in events:
        event.gpu_uuid = gpus.get(event.pci_bus_id.lower())
    return KernelLog(
        xids=events,
        xid_counts={str(xid): count for xid, count in sorted(Counter(event.xid for event in events).items())},
        gpus=gpus,
        lines=sum(1 for line in lines if line.strip()),
    )


def _xid_event(match: re.Match, line: str, number: int) -> XidEvent:
    xid = int(match["xid"])
    meaning, kind = XID_MEANINGS.get(xid, (None, None))
    stamp = TIMESTAMP.match(line)
    pid = clean((match["pid"] or "").strip("'"))
    return XidEvent(
        xid=xid,
        pci_bus_id=match["pci"],
        pid=int(pid) if pid and pid.isdigit() else None,
        process=None if (name := clean(match["name"])) in (None, "<unknown>") else name,
        message=clean(match["message"]),
        meaning=meaning,
        kind=kind,
        timestamp=stamp["stamp"].strip() if stamp else None,
        line=number,
    )
