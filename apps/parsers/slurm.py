"""Slurm's `scontrol show` records (`show node`, `show job [-d]`) and its host lists.

scontrol prints one record per object: the first line starts at column 0 (`NodeName=…`, `JobId=…`), the rest are
indented; jobs are separated by a blank line, while a node's record may hold a whitespace-only line of its own.
Fields are `Key=Value` separated by spaces, but a value may hold spaces itself (`Reason=…`, `OS=…`), so a value
runs to the next ` Key=` on its line. Keys may hold `:` and `/` (`AllocNode:Sid`, `CPUs/Task`). With `-d` a job
has one indented line per group of nodes with the same allocation: `Nodes=<hostlist> CPU_IDs=<ranges> Mem=<MB>
GRES=<name>:<count>(IDX:<ranges>)` — the CPU and GPU binding per node. `OverSubscribe=NO` is a job submitted with
`--exclusive` (whole nodes); `OK`, `YES` or `USER`/`MCS`/`TOPO` let other jobs share its nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .common import Result, split_lines
from .errors import ParseError

KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_:/]*)=")
RECORD_START = re.compile(r"^(JobId|NodeName|PartitionName|ReservationName)=")
NO_JOBS = re.compile(r"^No jobs in the system")
GPU_INDEX = re.compile(r"\(IDX:([0-9,\-]+)\)")


def fields_of(line: str) -> list[tuple[str, str]]:
    """The `Key=Value` pairs of one line, values kept as printed (spaces inside them too, the padding stripped)."""
    found = list(KEY.finditer(line))
    return [
        (match.group(1), line[match.end() : found[i + 1].start() if i + 1 < len(found) else len(line)].strip())
        for i, match in enumerate(found)
    ]


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list: `gpu[001-003,007],mgmt01` -> gpu001 gpu002 gpu003 gpu007 mgmt01 (zero padding kept)."""
    if text in ("", "(null)"):
        return []
    hosts = []
    for part in re.findall(r"[^,\[]*(?:\[[^\]]*\][^,\[]*)*", text):
        if not part:
            continue
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if match is None:
            hosts.append(part)
            continue
        prefix, ranges, rest = match.groups()
        for number in _numbers(ranges, keep_width=True):
            hosts.extend(prefix + number + tail for tail in (expand_hostlist(rest) or [""]))
    return hosts


def expand_ranges(text: str) -> list[int]:
    """`0-3,8,10-11` -> [0, 1, 2, 3, 8, 10, 11]."""
    return [int(number) for number in _numbers(text, keep_width=False)]


def _numbers(ranges: str, *, keep_width: bool) -> list[str]:
    found = []
    for piece in ranges.split(","):
        low, _, high = piece.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ParseError(f"not a Slurm range: {ranges!r}")
        width = len(low) if keep_width else 0
        found.extend(str(value).zfill(width) for value in range(int(low), int(high or low) + 1))
    return found


@dataclass
class Record(Result):
    """One object of `scontrol show`: its fields (the first of a repeated key), the `-d` detail lines, where."""

    kind: str  # JobId, NodeName, …
    fields: dict[str, str]
    details: list[dict[str, str]]  # the `Nodes=…` lines of `show job -d`
    detail_lines: list[int]
    line: int  # 1-based, the record's first line
    end: int


def parse_records(text: str) -> list[Record]:
    """Every record `scontrol show …` printed (empty for "No jobs in the system"); ParseError naming the line for
    text that is not scontrol's."""
    records: list[Record] = []
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        if NO_JOBS.match(line) and not records:
            return []
        if RECORD_START.match(line):
            records.append(Record(RECORD_START.match(line).group(1), {}, [], [], number, number))
        elif not line[0].isspace() or not records:
            raise ParseError(f"not an scontrol record line: {line[:80]!r}", line=number)
        pairs = fields_of(line)
        if not pairs:
            raise ParseError(f"no Key=Value on the line: {line[:80]!r}", line=number)
        record = records[-1]
        record.end = number
        if pairs[0][0] == "Nodes" and record.kind == "JobId":
            record.details.append(dict(pairs))
            record.detail_lines.append(number)
            continue
        for key, value in pairs:
            record.fields.setdefault(key, value)
    return records


@dataclass
class Allocation(Result):
    """A job's share of some of its nodes (one `-d` line): the CPUs and GPUs bound there."""

    nodes: list[str]
    cpu_ids: str  # as printed: 0-55,112-167
    gres: str
    gpus: list[int]
    mem_mb: int | None
    line: int


@dataclass
class SlurmJob(Result):
    job_id: str
    name: str
    user: str
    state: str
    partition: str
    nodes: list[str]
    oversubscribe: str
    allocations: list[Allocation] = field(default_factory=list)
    line: int = 0
    end: int = 0

    @property
    def exclusive(self) -> bool:
        """Submitted with --exclusive: no other job may share its nodes."""
        return self.oversubscribe.upper() == "NO"

    def on(self, host: str) -> Allocation | None:
        return next((allocation for allocation in self.allocations if host in allocation.nodes), None)


@dataclass
class JobList(Result):
    jobs: list[SlurmJob]

    def on_node(self, host: str) -> list[SlurmJob]:
        return [job for job in self.jobs if host in job.nodes]

    def named(self, name: str) -> list[SlurmJob]:
        return [job for job in self.jobs if job.name == name]


def parse_show_job(text: str) -> JobList:
    """`scontrol show job [-d] [id]`: every job with its node list, user, state, OverSubscribe and (with -d) the CPU
    and GPU binding on each node."""
    jobs = []
    for record in parse_records(text):
        if record.kind != "JobId":
            raise ParseError(f"a {record.kind} record in a job listing", line=record.line)
        values = record.fields
        allocations = []
        for detail, number in zip(record.details, record.detail_lines, strict=True):
            gres = detail.get("GRES", "")
            gpus = [index for found in GPU_INDEX.findall(gres) for index in expand_ranges(found)]
            mem = detail.get("Mem", "")
            allocations.append(
                Allocation(
                    expand_hostlist(detail["Nodes"]),
                    detail.get("CPU_IDs", ""),
                    gres,
                    gpus,
                    int(mem) if mem.isdigit() else None,
                    number,
                )
            )
        jobs.append(
            SlurmJob(
                job_id=values["JobId"],
                name=values.get("JobName", ""),
                user=values.get("UserId", "").split("(")[0],
                state=values.get("JobState", ""),
                partition=values.get("Partition", ""),
                nodes=expand_hostlist(values.get("NodeList", "")),
                oversubscribe=values.get("OverSubscribe", values.get("Shared", "")),
                allocations=allocations,
                line=record.line,
                end=record.end,
            )
        )
    return JobList(jobs)


# --- node states: `sinfo -N` and `scontrol show node` ---------------------------------------------------------------

# What Rackpilot asks sinfo for: one line per node and partition, the reason last since it may hold the separator.
SINFO_FORMAT = "%N|%T|%H|%u|%E"
# sinfo's long state (%T) ends in a flag: * not responding, ~ powered off, # powering up, ! power down pending,
# % powering down, $ in a maintenance reservation, @ reboot pending, ^ reboot issued, - planned (backfill).
STATE_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "!": "POWER_DOWN", "%": "POWERING_DOWN"}
STATE_FLAGS |= {"$": "MAINTENANCE", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED", "-": "PLANNED"}
# scontrol appends who set the reason and when: `Reason=cable slow [root@2026-12-05T07:58:51]`.
REASON_SUFFIX = re.compile(r"^(?P<text>.*?)\s*\[(?P<user>[^@\]\s]*)@(?P<at>\d{4}-\d\d-\d\dT[\d:]+)\]")
DRAIN_STATES = {"DRAINED", "DRAINING", "DRAIN"}


@dataclass
class SchedulerNode(Result):
    """One node as the Slurm controller sees it: its base state (IDLE, ALLOCATED, DOWN, …, as scontrol prints it),
    its flags (DRAIN, NOT_RESPONDING, REBOOT_REQUESTED, …), and the reason an operator or Slurm gave, by whom, when
    (the time as printed: the controller's local time, ISO 8601 without a zone)."""

    name: str
    state: str
    flags: list[str]
    reason: str
    reason_user: str
    reason_time: str
    line: int

    @property
    def drained(self) -> bool:
        """Kept from new work: drained (idle), draining (jobs still running) or in DRAIN with a reboot pending."""
        return "DRAIN" in self.flags or self.state in DRAIN_STATES

    @property
    def drain_state(self) -> str:
        """DRAINED when nothing runs on it any more, DRAINING while jobs still do, else empty."""
        if not self.drained:
            return ""
        if self.state in {"ALLOCATED", "MIXED", "COMPLETING", "DRAINING"}:
            return "DRAINING"
        return "DRAINED"


@dataclass
class SchedulerNodes(Result):
    nodes: list[SchedulerNode]

    def by_name(self) -> dict[str, SchedulerNode]:
        return {node.name: node for node in self.nodes}


def parse_sinfo_nodes(text: str) -> SchedulerNodes:
    """`sinfo -N -h -o '%N|%T|%H|%u|%E'`: per node its state (`drained`, `draining`, `idle*`, `mixed`, …), when and
    by whom the reason was set, and the reason ("none" when there is none). A node in several partitions is listed
    once per partition; the first line counts."""
    nodes: dict[str, SchedulerNode] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|", 4)
        if len(parts) != 5:
            raise ParseError(f"expected NODE|STATE|TIME|USER|REASON, got {line[:80]!r}", line=number)
        name, long_state, at, user, reason = (part.strip() for part in parts)
        flags = []
        while long_state and long_state[-1] in STATE_FLAGS:
            flags.insert(0, STATE_FLAGS[long_state[-1]])
            long_state = long_state[:-1]
        if not name or not re.fullmatch(r"[a-z_]+", long_state):
            raise ParseError(f"not a node and sinfo state: {line[:80]!r}", line=number)
        state = long_state.upper()
        if state in DRAIN_STATES:
            flags.insert(0, "DRAIN")
        elif state == "REBOOT_REQUESTED" or state == "REBOOT":
            flags.insert(0, "REBOOT_REQUESTED")
        reason = "" if reason == "none" else reason
        nodes.setdefault(
            name,
            SchedulerNode(
                name=name,
                state=state,
                flags=list(dict.fromkeys(flags)),
                reason=reason,
                reason_user="" if user == "Unknown" or not reason else user,
                reason_time="" if at in ("Unknown", "None") or not reason else at,
                line=number,
            ),
        )
    return SchedulerNodes(list(nodes.values()))


def parse_show_nodes(text: str) -> SchedulerNodes:
    """`scontrol show node [-o]`: per node `State=IDLE+DRAIN+NOT_RESPONDING` split into the base state and its
    flags, and `Reason=… [user@time]`. The reason is read up to its `[user@time]` suffix, so a reason that holds
    `Key=` text of its own is kept whole."""
    nodes = []
    for record in parse_records(text):
        if record.kind != "NodeName":
            raise ParseError(f"a {record.kind} record in a node listing", line=record.line)
        state, *flags = record.fields.get("State", "UNKNOWN").split("+")
        reason, user, at = "", "", ""
        lines = text.splitlines()[record.line - 1 : record.end]
        raw = next((line for line in lines if re.search(r"(?:^|\s)Reason=", line)), None)
        if raw is not None:
            value = re.split(r"(?:^|\s)Reason=", raw, maxsplit=1)[1].strip()
            match = REASON_SUFFIX.match(value)
            reason, user, at = (match["text"], match["user"], match["at"]) if match else (value, "", "")
        nodes.append(
            SchedulerNode(
                name=record.fields["NodeName"],
                state=state,
                flags=flags,
                reason="" if reason == "(null)" else reason,
                reason_user=user,
                reason_time=at,
                line=record.line,
            )
        )
    return SchedulerNodes(nodes)


def compress_hostlist(hosts: list[str]) -> str:
    """Slurm's compressed host list, the inverse of expand_hostlist: gpu001 gpu002 gpu004 mgmt01 ->
    gpu[001-002,004],mgmt01 (names sorted; the zero padding of each name kept)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain = []
    for host in sorted(set(hosts)):
        match = re.fullmatch(r"(.*?)(\d+)", host)
        if match is None:
            plain.append(host)
            continue
        groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
    parts = []
    for (stem, width), numbers in sorted(groups.items()):
        if len(numbers) == 1:
            parts.append(f"{stem}{numbers[0]:0{width}d}")
            continue
        runs, start = [], numbers[0]
        for previous, number in zip(numbers, [*numbers[1:], None], strict=True):
            if number != previous + 1 if number is not None else True:
                runs.append(f"{start:0{width}d}" + (f"-{previous:0{width}d}" if previous != start else ""))
                start = number
        parts.append(f"{stem}[{','.join(runs)}]")
    return ",".join(parts + plain)
