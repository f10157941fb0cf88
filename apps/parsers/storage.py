"""What a node shows about its storage and its data loader while a training job waits on it: I/O pressure
(`/proc/pressure/io`, the kernel's PSI), the mounts (`findmnt -J --list -o TARGET,SOURCE,FSTYPE,OPTIONS`), the
processes (`ps -eo pid,ppid,stat,comm,args`: the trainers and their DataLoader workers), and the kernel's words for
storage that stopped answering (NFS "server … not responding", Lustre's lost connection, hung tasks)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .common import Result, require_content, split_lines, unexpected
from .errors import ParseError

# --- /proc/pressure/io -------------------------------------------------------------------------------------------

_PSI = re.compile(
    r"^(?P<kind>some|full) avg10=(?P<avg10>\d+\.\d+) avg60=(?P<avg60>\d+\.\d+) avg300=(?P<avg300>\d+\.\d+) "
    r"total=(?P<total>\d+)$"
)


@dataclass
class Pressure(Result):
    """One PSI line: the share of wall time (percent) over 10 s, 60 s and 300 s in which tasks stalled on the
    resource (`some`: at least one task, `full`: every non-idle task at once), and the total in microseconds."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


@dataclass
class PressureStall(Result):
    some: Pressure
    full: Pressure | None  # absent for CPU pressure on older kernels; io always has it


def parse_psi(text: str) -> PressureStall:
    """`cat /proc/pressure/io` (Documentation/accounting/psi.rst): a `some` line and a `full` line."""
    lines = require_content(text, "/proc/pressure output")
    found: dict[str, Pressure] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        match = _PSI.match(line.strip())
        if match is None:
            raise ParseError(f"expected 'some|full avg10=… avg60=… avg300=… total=…', got {line[:80]!r}", line=number)
        found[match["kind"]] = Pressure(
            float(match["avg10"]), float(match["avg60"]), float(match["avg300"]), int(match["total"])
        )
    if "some" not in found:
        raise unexpected(lines, "a 'some avg10=…' line")
    return PressureStall(found["some"], found.get("full"))


# --- findmnt -J --list -o TARGET,SOURCE,FSTYPE,OPTIONS ---------------------------------------------------------

NETWORK_FILE_SYSTEMS = ("nfs", "nfs4", "lustre", "cifs", "smb3", "ceph", "fuse.ceph-fuse", "beegfs", "gpfs")


@dataclass
class Mount(Result):
    target: str
    source: str
    fstype: str
    options: list[str]

    @property
    def remote(self) -> bool:
        return self.fstype in NETWORK_FILE_SYSTEMS

    @property
    def server(self) -> str:
        """Who serves it: NFS `host:/export`, Lustre `nid@o2ib:/fsname` (the MGS), '' for a local one."""
        if not self.remote or ":" not in self.source:
            return ""
        return self.source.split(":", 1)[0]

    def option(self, name: str) -> str | None:
        """`hard` -> '' when set, `timeo=600` -> '600', None when absent."""
        for option in self.options:
            key, equals, value = option.partition("=")
            if key == name:
                return value if equals else ""
        return None


@dataclass
class Mounts(Result):
    mounts: list[Mount] = field(default_factory=list)

    def holding(self, path: str) -> Mount | None:
        """The mount a path lives on (the longest target that is the path or above it)."""
        above = [m for m in self.mounts if path == m.target or path.startswith(m.target.rstrip("/") + "/")]
        return max(above, key=lambda mount: len(mount.target), default=None)


def parse_findmnt(text: str) -> Mounts:
    """findmnt's JSON (util-linux 2.3x): {"filesystems": [{"target", "source", "fstype", "options"}, …]}; with
    --list the entries are flat, without it children nest under their parent (both are read)."""
    lines = require_content(text, "findmnt -J output")
    try:
        data = json.loads(text)
        entries = list(data["filesystems"])
    except (ValueError, KeyError, TypeError):
        raise unexpected(lines, 'findmnt\'s JSON ({"filesystems": [...]})') from None
    mounts = []
    while entries:
        entry = entries.pop(0)
        try:
            mounts.append(
                Mount(entry["target"], entry["source"], entry["fstype"], [o for o in entry["options"].split(",") if o])
            )
        except (KeyError, TypeError, AttributeError):
            raise ParseError("a findmnt entry lacks target, source, fstype or options", line=1) from None
        entries += entry.get("children", [])
    return Mounts(mounts)


# --- ps -eo pid,ppid,stat,comm,args ----------------------------------------------------------------------------

WORKER_NAME = "pt_data_worker"  # what PyTorch's DataLoader names its worker processes (torch.utils.data)


@dataclass
class Process(Result):
    pid: int
    ppid: int
    stat: str
    comm: str
    args: str

    @property
    def uninterruptible(self) -> bool:
        """State D: waiting in the kernel for I/O (an NFS server that does not answer keeps it there)."""
        return self.stat.startswith("D")


@dataclass
class Processes(Result):
    processes: list[Process] = field(default_factory=list)

    def children(self, pid: int) -> list[Process]:
        return [process for process in self.processes if process.ppid == pid]


def parse_ps(text: str) -> Processes:
    """procps `ps -eo pid,ppid,stat,comm,args`: a header (PID PPID STAT COMMAND COMMAND), then one line each."""
    lines = require_content(text, "ps output")
    rows = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    header = rows[0][1].split()
    if header[:3] != ["PID", "PPID", "STAT"] or len(header) != 5:
        raise unexpected(lines, "the ps header PID PPID STAT COMMAND COMMAND")
    processes = []
    for number, line in rows[1:]:
        cells = line.split(None, 4)
        if len(cells) < 4 or not cells[0].isdigit() or not cells[1].isdigit():
            raise ParseError(f"expected 'PID PPID STAT COMMAND ARGS', got {line[:80]!r}", line=number)
        processes.append(Process(int(cells[0]), int(cells[1]), cells[2], cells[3], cells[4] if len(cells) > 4 else ""))
    return Processes(processes)


# --- the kernel log: storage that stopped answering -------------------------------------------------------------

_NFS = re.compile(r"nfs: server (?P<server>\S+) (?P<state>not responding, still trying|not responding, timed out|OK)")
_LUSTRE = re.compile(r"Lustre: (?P<device>\S+): Connection to (?P<service>\S+) \(at (?P<server>[^)]+)\) was lost")
_LUSTRE_BACK = re.compile(r"Lustre: (?P<device>\S+): Connection restored to (?P<service>\S+) \(at (?P<server>[^)]+)\)")
_HUNG = re.compile(r"INFO: task (?P<task>.+?):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds\.")


@dataclass
class StorageStall(Result):
    line: int  # 1-based
    kind: str  # nfs_not_responding | lustre_connection_lost | hung_task
    text: str
    server: str = ""
    task: str = ""
    pid: int | None = None
    seconds: int | None = None


@dataclass
class StorageStalls(Result):
    stalls: list[StorageStall] = field(default_factory=list)  # the servers still not answering, and hung tasks

    @property
    def servers(self) -> list[str]:
        return sorted({stall.server for stall in self.stalls if stall.server})


def parse_storage_stalls(text: str) -> StorageStalls:
    """The kernel log's lines for a storage server that stopped answering (NFS, Lustre), unless a later line says
    it answers again (`nfs: server X OK`, Lustre's `Connection restored`), and the hung-task warnings."""
    open_stalls: dict[str, list[StorageStall]] = {}
    hung = []
    for number, line in enumerate(split_lines(text), start=1):
        if match := _NFS.search(line):
            if match["state"] == "OK":
                open_stalls.pop(match["server"], None)
            else:
                stall = StorageStall(number, "nfs_not_responding", line.strip(), server=match["server"])
                open_stalls.setdefault(match["server"], []).append(stall)
        elif match := _LUSTRE.search(line):
            stall = StorageStall(number, "lustre_connection_lost", line.strip(), server=match["server"])
            open_stalls.setdefault(match["server"], []).append(stall)
        elif match := _LUSTRE_BACK.search(line):
            open_stalls.pop(match["server"], None)
        elif match := _HUNG.search(line):
            hung.append(
                StorageStall(
                    number,
                    "hung_task",
                    line.strip(),
                    task=match["task"],
                    pid=int(match["pid"]),
                    seconds=int(match["seconds"]),
                )
            )
    stalls = [stall for group in open_stalls.values() for stall in group] + hung
    return StorageStalls(sorted(stalls, key=lambda stall: stall.line))
