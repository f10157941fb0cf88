"""Runbook 1, NCCL timeout / hang, as pure functions: which commands to read, what their output shows, how that
moves the ranking of causes, what the conclusion is and which commands fix it.

No database here: the kind (apps/diagnosis/kinds/nccl_timeout.py) hands in plain facts read from the inventory
(NodeFacts) and the commands' output, and stores what comes back. The branches:

1. the training log on every node of the job: watchdog timeouts (SeqNum, OpType, timeout, rank), the ranks that lag
   (least work enqueued), CUDA errors and NET/IB errors → the suspect nodes (rank map: node, GPU, NIC);
2. on the suspect nodes: data-NIC MTU against the plane (ip link), PFC and ECN on the RDMA priority (mlnx_qos,
   sysfs), link state (ethtool), drops / pause frames / CRC errors (ethtool -S), Xids in the kernel log (dmesg);
3. conclude: MTU mismatch → set the MTU; PFC off → enable PFC; link down → the cable and switch port from the
   inventory; a lost GPU → drain and reset; every check clean → the storage / data-loader branch
   (apps/diagnosis/storage_checks.py: free space, mounts, I/O pressure, the loader's workers, hung storage).
"""

from dataclasses import dataclass, field

from apps.core.text import counted
from apps.diagnosis.choices import ADVICE, Cause, EvidenceVerdict
from apps.nodeexec import catalogue
from apps.parsers import network
from apps.parsers.common import split_lines
from apps.parsers.dmesg import parse_dmesg
from apps.parsers.errors import ParseError
from apps.parsers.training_log import parse_training_log
from apps.parsers.triage import triage

# Of the training log's end: 20,000 steps of Megatron's every-10-steps lines. No more: a job keeps the first
# RACKPILOT_ARTIFACT_MAX_BYTES (1 MiB) of a command's output, and 4,000 such lines (~300 bytes) passed it, so the
# read lost the newest lines (the resume a re-check looks for) and kept older ones.
LOG_LINES = 2000
STRONG = 8  # a cause needs this score to be concluded


@dataclass(frozen=True)
class NicFacts:
    name: str
    mtu: int  # what the inventory (the plane) says
    rdma_device: bool
    pfc_priority: int | None  # the RDMA priority PFC must be on (None: no PFC expected)
    ecn: bool
    cable: str = ""  # "cable c-014: gpu003:ens3np0 ↔ leaf-r1-a Ethernet1/5"


@dataclass(frozen=True)
class NodeFacts:
    hostname: str
    node_id: int | None
    nics: tuple[NicFacts, ...]

    def nic(self, name: str) -> NicFacts | None:
        return next((nic for nic in self.nics if nic.name == name), None)


@dataclass(frozen=True)
class Read:
    """One catalogue command of a check, and the key its output is found under."""

    key: str
    command: str
    values: tuple = ()

    def argv(self) -> list[str]:
        return catalogue.build(self.command, **dict(self.values))

    def text(self) -> str:
        return catalogue.shell_join(self.argv())


@dataclass
class Observation:
    """What one command's output shows about one thing; becomes an Evidence row."""

    check: str
    subject: str
    verdict: str
    summary: str
    command: str
    excerpt: str = ""
    hostname: str = ""
    data: dict = field(default_factory=dict)


def log_read(log_path: str) -> Read:
    return Read("log", "tail-log", (("number", LOG_LINES), ("log_file", log_path)))


def ecn_path(interface: str, priority: int) -> str:
    return f"/sys/class/net/{interface}/ecn/roce_np/enable/{priority}"


def network_reads(node: NodeFacts) -> list[Read]:
    reads = [Read("links", "ip-link"), Read("dmesg", "dmesg")]
    for nic in node.nics:
        reads.append(Read(f"ethtool:{nic.name}", "ethtool", (("interface", nic.name),)))
        reads.append(Read(f"stats:{nic.name}", "ethtool-stats", (("interface", nic.name),)))
        if nic.rdma_device:
            reads.append(Read(f"qos:{nic.name}", "mlnx-qos", (("interface", nic.name),)))
            if nic.ecn and nic.pfc_priority is not None:
                reads.append(Read(f"ecn:{nic.name}", "read-file", (("path", ecn_path(nic.name, nic.pfc_priority)),)))
    return reads


# --- the log ----------------------------------------------------------------------------------------------------


def judge_log(hostname: str, text: str, command: str, rank_map: dict[int, tuple[str, int]]) -> list[Observation]:
    """The training log of one node: the last attempt's timeouts and errors, each citing its lines."""
    run = parse_training_log(text)
    lines = split_lines(text)
    start = (run.last_start_line or 1) - 1
    recent = "\n".join(lines[start:])
    found: list[Observation] = []
    if run.timeouts:
        first = run.timeouts[0]
        ranks = sorted({timeout.rank for timeout in run.timeouts})
        lagging = run.lagging_ranks
        found.append(
            Observation(
                check="watchdog",
                subject=f"ranks {_ranges(ranks)}",
                verdict=EvidenceVerdict.FAULT,
                summary=(
                    f"{counted(len(ranks), 'rank')} timed out in {first.op} SeqNum {first.seq} after "
                    f"{first.timeout_ms} ms"
                    + (f"; ranks {_ranges(lagging)} lag (least work enqueued)" if lagging else "")
                ),
                command=command,
                excerpt="\n".join(timeout.text for timeout in run.timeouts[:4]),
                hostname=hostname,
                data={
                    "ranks": ranks,
                    "lagging": lagging,
                    "seq": first.seq,
                    "op": first.op,
                    "timeout_ms": first.timeout_ms,
                    "enqueued": {str(t.rank): t.last_enqueued for t in run.timeouts if t.last_enqueued is not None},
                    "lines": [timeout.line for timeout in run.timeouts[:50]],
                },
            )
        )
    for finding in triage(recent).findings:
        if finding.problem in LOG_CHECKS:
            found.append(_triage_observation(hostname, command, finding, start))
    if not found:
        progressing = run.steps_since_start > 0
        found.append(
            Observation(
                check="progress",
                subject="",
                verdict=EvidenceVerdict.HEALTHY if progressing else EvidenceVerdict.INFO,
                summary=(
                    f"training progresses: {counted(run.steps_since_start, 'iteration line')} since the last start"
                    + (f" (resumed from the checkpoint of step {run.resumed_from})" if run.resumed_from else "")
                    + f", newest step {run.last_step}"
                    if progressing
                    else "no timeout, error or progress in the last attempt"
                ),
                command=command,
                hostname=hostname,
                data={
                    "steps": run.steps_since_start,
                    "last_step": run.last_step,
                    "attempts": run.attempts,
                    "resumed_from": run.resumed_from,
                },
            )
        )
    return found


# The triage problems in a training log that runbook 1 weighs, and the check each counts as (WEIGHTS): a GPU whose
# firmware stopped answering or that needs a reset is lost as with Xid 79; an IB port down in the log is a link down;
# a step Slurm could not kill is stuck in the kernel, most often on storage (as a hung task).
LOG_CHECKS = {
    "cuda_error": "cuda",
    "gpu_fell_off_bus": "cuda",
    "gpu_firmware_failure": "cuda",
    "gpu_reset_required": "cuda",
    "nccl_ib_error": "ib",
    "ib_port_down": "link",
    "disk_full": "disk",
    "storage_not_responding": "hung",
    "slurm_unkillable_step": "blocked",
}
# In a kernel log: what takes a GPU out of service although many drivers print no Xid for it.
GPU_LOST_WITHOUT_XID = ("gpu_firmware_failure", "gpu_reset_required")


def gpu_lost_without_xid(text: str) -> list:
    """The kernel log's GSP timeouts and NV_ERR_RESET_REQUIRED findings (apps.parsers.triage), citing their lines."""
    return [finding for finding in triage(text).findings if finding.problem in GPU_LOST_WITHOUT_XID]


def _triage_observation(hostname: str, command: str, finding, offset: int) -> Observation:
    subject = finding.nic or (f"rank {finding.rank}" if finding.rank is not None else "")
    return Observation(
        check=LOG_CHECKS[finding.problem],
        subject=subject,
        verdict=EvidenceVerdict.FAULT,
        summary=finding.detail[:300],
        command=command,
        excerpt="\n".join(finding.excerpt[:4]),
        hostname=finding.node or hostname,
        data={
            "problem": finding.problem,
            "rank": finding.rank,
            "lines": [line + offset for line in finding.lines],
            "advice": ADVICE[finding.problem].next_step,
        },
    )


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    parts, run = [], []
    for number in sorted(numbers):
        if run and number == run[-1] + 1:
            run.append(number)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [number]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(parts)


def lagging(observations: list[Observation], rank_map: dict[int, tuple[str, int]]) -> Observation | None:
    """Across every node's watchdog lines: the ranks that enqueued the least work, and where they run."""
    enqueued = {
        int(rank): count
        for seen in observations
        if seen.check == "watchdog"
        for rank, count in seen.data.get("enqueued", {}).items()
    }
    if len(set(enqueued.values())) < 2:
        return None
    lowest, highest = min(enqueued.values()), max(enqueued.values())
    ranks = sorted(rank for rank, count in enqueued.items() if count == lowest)
    places: dict[str, list[int]] = {}
    for rank in ranks:
        host, local = rank_map.get(rank, ("", rank))
        places.setdefault(host, []).append(local)
    where = "; ".join(f"{host or 'unknown node'} GPUs {_ranges(gpus)}" for host, gpus in sorted(places.items()))
    return Observation(
        check="lag",
        subject=f"ranks {_ranges(ranks)}",
        verdict=EvidenceVerdict.FAULT,
        summary=f"ranks {_ranges(ranks)} enqueued NCCL work up to {lowest}, the others up to {highest}: they lag "
        f"({where})",
        command="(watchdog lines of every node, compared)",
        hostname=next(iter(places)) if len(places) == 1 else "",
        data={"ranks": ranks, "hosts": sorted(host for host in places if host), "lowest": lowest},
    )


def suspects(observations: list[Observation], rank_map: dict[int, tuple[str, int]]) -> list[str]:
    """The nodes to check next: those holding lagging or failed ranks, or reporting NET/IB errors."""
    hosts: set[str] = set()
    for seen in observations:
        if seen.check == "lag":
            hosts.update(seen.data.get("hosts", []))
        elif seen.check in ("ib", "cuda", "disk"):
            rank = seen.data.get("rank")
            hosts.add(rank_map[rank][0] if rank in rank_map else seen.hostname)
    return sorted(host for host in hosts if host)


# --- the node ---------------------------------------------------------------------------------------------------


def judge_network(node: NodeFacts, outputs: dict[str, tuple[bool, str, str]]) -> list[Observation]:
    """outputs: key -> (ran ok, output text, command line). One observation per NIC and check, plus the kernel log."""
    found: list[Observation] = []

    def could_not(key: str, check: str, subject: str) -> bool:
        ok, text, command = outputs.get(key, (False, "", ""))
        if not ok:
            found.append(
                Observation(check, subject, EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)
            )
        return not ok

    if not could_not("links", "mtu", ""):
        _, text, command = outputs["links"]
        links = {link.name: link for link in network.parse_ip_link(text).links}
        for nic in node.nics:
            link = links.get(nic.name)
            if link is None:
                continue
            good = link.mtu == nic.mtu
            found.append(
                Observation(
                    "mtu",
                    nic.name,
                    EvidenceVerdict.HEALTHY if good else EvidenceVerdict.FAULT,
                    f"MTU {link.mtu}, the plane's is {nic.mtu}",
                    command,
                    f"{link.index}: {nic.name}: <{','.join(link.flags)}> mtu {link.mtu} state {link.state}",
                    data={"mtu": link.mtu, "expected": nic.mtu},
                )
            )
    for nic in node.nics:
        key = f"ethtool:{nic.name}"
        if not could_not(key, "link", nic.name):
            _, text, command = outputs[key]
            settings = network.parse_ethtool(text)
            up = bool(settings.link_detected)
            found.append(
                Observation(
                    "link",
                    nic.name,
                    EvidenceVerdict.HEALTHY if up else EvidenceVerdict.FAULT,
                    (f"link up at {settings.speed_raw}" if up else "no link")
                    + (f" ({nic.cable})" if nic.cable else ""),
                    command,
                    _excerpt(text, "Speed:", "Link detected:"),
                    data={"link": up, "cable": nic.cable},
                )
            )
        key = f"stats:{nic.name}"
        if key in outputs and not could_not(key, "counters", nic.name):
            _, text, command = outputs[key]
            found.append(_counters(nic, network.parse_ethtool_stats(text).counters, text, command))
        if nic.rdma_device and nic.pfc_priority is not None and not could_not(f"qos:{nic.name}", "pfc", nic.name):
            _, text, command = outputs[f"qos:{nic.name}"]
            qos = network.parse_mlnx_qos(text)
            on = nic.pfc_priority in qos.pfc_priorities
            found.append(
                Observation(
                    "pfc",
                    nic.name,
                    EvidenceVerdict.HEALTHY if on else EvidenceVerdict.FAULT,
                    f"PFC on priorities {qos.pfc_priorities or 'none'}, trust {qos.trust}; the RDMA priority is "
                    f"{nic.pfc_priority}",
                    command,
                    _excerpt(text, "trust", "enabled", "Priority trust"),
                    data={"priorities": qos.pfc_priorities, "expected": nic.pfc_priority, "trust": qos.trust},
                )
            )
        key = f"ecn:{nic.name}"
        if key in outputs and not could_not(key, "ecn", nic.name):
            _, text, command = outputs[key]
            enabled = text.strip() == "1"
            found.append(
                Observation(
                    "ecn",
                    nic.name,
                    EvidenceVerdict.HEALTHY if enabled else EvidenceVerdict.FAULT,
                    f"ECN {'enabled' if enabled else 'disabled'} on priority {nic.pfc_priority}",
                    command,
                    f"{ecn_path(nic.name, nic.pfc_priority)}: {text.strip()}",
                )
            )
    if not could_not("dmesg", "xid", ""):
        _, text, command = outputs["dmesg"]
        try:
            xids = parse_dmesg(text).xids
        except ParseError:
            xids = []
        lost = [event for event in xids if event.xid == 79]
        silent = gpu_lost_without_xid(text)
        what = [f"Xid 79 on {', '.join(event.pci_bus_id for event in lost)}: GPU fallen off the bus"] if lost else []
        what += [f"{finding.gpu or 'a GPU'}: {finding.detail}" for finding in silent]
        lines = split_lines(text)
        found.append(
            Observation(
                "xid",
                lost[0].pci_bus_id if lost else (silent[0].gpu or "" if silent else ""),
                EvidenceVerdict.FAULT if what else EvidenceVerdict.HEALTHY,
                "; ".join(what)[:300]
                or f"no Xid 79, GSP timeout or reset-required in the kernel log "
                f"({counted(len(xids), 'other Xid line')})",
                command,
                "\n".join(
                    [lines[event.line - 1] for event in lost[:4]] + [line for f in silent for line in f.excerpt[:2]]
                ),
                data={
                    "xids": sorted({event.xid for event in xids}),
                    "problems": sorted({finding.problem for finding in silent}),
                },
            )
        )
    for seen in found:
        seen.hostname = node.hostname
    return found


def _counters(nic: NicFacts, counters: dict[str, int], text: str, command: str) -> Observation:
    """Drops without pause frames on the RDMA priority: lossless RoCE is not lossless (PFC is not working)."""
    discards = counters.get("rx_discards_phy", 0) + counters.get("rx_out_of_buffer", 0)
    priority = nic.pfc_priority
    pauses = counters.get(f"rx_prio{priority}_pause", 0) if priority is not None else 0
    crc, downs = counters.get("rx_crc_errors_phy", 0), counters.get("link_down_events_phy", 0)
    parts = []
    if discards:
        parts.append(
            f"{discards} frames dropped" + (f" and no pause frames on priority {priority}" if not pauses else "")
        )
    if crc:
        parts.append(f"{crc} CRC errors")
    if downs:
        parts.append(counted(downs, "link-down event"))
    wanted = ("rx_discards_phy", "rx_out_of_buffer", "rx_crc_errors_phy", "link_down_events_phy")
    wanted += (f"rx_prio{priority}_pause",) if priority is not None else ()
    return Observation(
        "counters",
        nic.name,
        EvidenceVerdict.FAULT if parts else EvidenceVerdict.HEALTHY,
        "; ".join(parts) or f"no drops, CRC errors or link-down events; {pauses} pause frames on priority {priority}",
        command,
        _excerpt(text, *(f"{name}:" for name in wanted)),
        data={"discards": discards, "pauses": pauses, "crc": crc, "link_down_events": downs},
    )


def _excerpt(text: str, *starts: str) -> str:
    return "\n".join(line for line in split_lines(text) if line.strip().startswith(starts))[:1000]


# --- ranking ----------------------------------------------------------------------------------------------------

NETWORK = (Cause.PFC_OFF, Cause.MTU_MISMATCH, Cause.LINK_DOWN)
# (check, verdict) -> {cause: points}; a negative score contradicts the cause.
WEIGHTS: dict[tuple[str, str], dict[str, int]] = {
    ("watchdog", EvidenceVerdict.FAULT): dict.fromkeys((*NETWORK, Cause.STORAGE_SLOW, Cause.DATALOADER_STALL), 1),
    ("ib", EvidenceVerdict.FAULT): dict.fromkeys(NETWORK, 2),
    ("cuda", EvidenceVerdict.FAULT): {Cause.GPU_LOST: 4},
    ("disk", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_DISK_FULL: 8},
    ("mtu", EvidenceVerdict.FAULT): {Cause.MTU_MISMATCH: 10},
    ("mtu", EvidenceVerdict.HEALTHY): {Cause.MTU_MISMATCH: -3},
    ("pfc", EvidenceVerdict.FAULT): {Cause.PFC_OFF: 10},
    ("pfc", EvidenceVerdict.HEALTHY): {Cause.PFC_OFF: -3},
    ("ecn", EvidenceVerdict.FAULT): {Cause.PFC_OFF: 2},
    ("counters", EvidenceVerdict.FAULT): {Cause.PFC_OFF: 2, Cause.LINK_DOWN: 1},
    ("link", EvidenceVerdict.FAULT): {Cause.LINK_DOWN: 10},
    ("link", EvidenceVerdict.HEALTHY): {Cause.LINK_DOWN: -3},
    ("xid", EvidenceVerdict.FAULT): {Cause.GPU_LOST: 10},
    ("xid", EvidenceVerdict.HEALTHY): {Cause.GPU_LOST: -3},
    # The storage / data-loader branch (apps/diagnosis/storage_checks.py):
    ("space", EvidenceVerdict.FAULT): {Cause.CHECKPOINT_DISK_FULL: 10},
    ("space", EvidenceVerdict.HEALTHY): {Cause.CHECKPOINT_DISK_FULL: -3},
    ("hung", EvidenceVerdict.FAULT): {Cause.STORAGE_SLOW: 10},
    ("hung", EvidenceVerdict.HEALTHY): {Cause.STORAGE_SLOW: -3},
    ("io_pressure", EvidenceVerdict.FAULT): {Cause.STORAGE_SLOW: 4},
    ("blocked", EvidenceVerdict.FAULT): {Cause.STORAGE_SLOW: 2},
    ("loader", EvidenceVerdict.FAULT): {Cause.DATALOADER_STALL: 10},
    ("loader", EvidenceVerdict.HEALTHY): {Cause.DATALOADER_STALL: -3},
}


def weights(seen: Observation) -> dict[str, int]:
    return WEIGHTS.get((seen.check, seen.verdict), {})


def network_clean(observations: list[Observation]) -> bool:
    """Every network check ran and none shows a fault (the storage / data-loader branch)."""
    checks = [seen for seen in observations if seen.check in ("mtu", "pfc", "ecn", "link", "counters", "xid")]
    return bool(checks) and all(seen.verdict == EvidenceVerdict.HEALTHY for seen in checks)


def conclude(scores: dict[str, int]) -> str:
    """The network cause to act on ('' when nothing is strong enough; a clean network takes the storage branch)."""
    network = {cause: score for cause, score in scores.items() if cause in (*NETWORK, Cause.GPU_LOST)}
    best = max(network.items(), key=lambda item: (item[1], -list(Cause.values).index(item[0])), default=("", 0))
    return best[0] if best[1] >= STRONG else ""


# --- the fix ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixCommand:
    hostname: str
    command: str
    values: tuple

    def text(self) -> str:
        return catalogue.shell_join(catalogue.build(self.command, **dict(self.values)))

    def as_json(self) -> dict:
        return {"hostname": self.hostname, "command": self.command, "values": dict(self.values), "text": self.text()}


def fix_for(cause: str, nodes: dict[str, NodeFacts], observations: list[Observation]) -> tuple[str, list[FixCommand]]:
    """What to do for the cause: a summary and the exact commands per node (none: a person must act)."""
    faulty = [seen for seen in observations if seen.verdict == EvidenceVerdict.FAULT]
    if cause == Cause.MTU_MISMATCH:
        commands = [
            FixCommand(seen.hostname, "set-mtu", (("interface", seen.subject), ("number", seen.data["expected"])))
            for seen in faulty
            if seen.check == "mtu"
        ]
        where = ", ".join(f"{c.hostname} {dict(c.values)['interface']}" for c in commands)
        return f"Set MTU {commands[0].values[1][1]} on {where}", commands
    if cause == Cause.PFC_OFF:
        commands = []
        for seen in faulty:
            if seen.check != "pfc":
                continue
            priority = int(seen.data["expected"])
            mask = ",".join("1" if index == priority else "0" for index in range(8))
            commands.append(FixCommand(seen.hostname, "set-qos", (("interface", seen.subject), ("pfc_mask", mask))))
        where = ", ".join(f"{c.hostname} {dict(c.values)['interface']}" for c in commands)
        return f"Enable PFC on priority {priority} on {where}", commands
    if cause == Cause.LINK_DOWN:
        down = [seen for seen in faulty if seen.check == "link"]
        cables = "; ".join(
            f"{seen.hostname} {seen.subject}: {seen.data.get('cable') or 'no cable in the inventory'}" for seen in down
        )
        return f"Reseat or replace the cable and check the switch port — {cables}", []
    if cause == Cause.GPU_LOST:
        lost = [seen for seen in faulty if seen.check in ("xid", "cuda")]
        where = ", ".join(f"{seen.hostname} {seen.subject}".strip() for seen in lost)
        return f"Drain {where}, reset the GPU (or power-cycle the node), then restart the job", []
    return "", []
