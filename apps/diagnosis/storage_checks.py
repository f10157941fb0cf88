"""Runbook 1's storage / data-loader branch, as pure functions: taken when every network check of the lagging
ranks' nodes ran clean (the field's rule: NCCL timeouts are most often storage or a starved loader). On those nodes
it reads the checkpoint volume's free space (df), the mounts and their servers (findmnt), the I/O pressure (PSI),
the trainers' DataLoader workers (ps) and the kernel's words for storage that stopped answering (dmesg), and ranks
storage slow / not responding, checkpoint volume full and starved data loader. Nothing strong enough: it says so.
"""

from statistics import median

from apps.core.text import counted, noun
from apps.diagnosis import utilisation
from apps.diagnosis.choices import Cause, EvidenceVerdict
from apps.diagnosis.recovery import judge_space
from apps.diagnosis.runbook import Observation, Read
from apps.parsers.errors import ParseError
from apps.parsers.storage import WORKER_NAME, Mounts, parse_findmnt, parse_ps, parse_psi, parse_storage_stalls

PSI_PATH = "/proc/pressure/io"
PRESSURE_FULL_PCT = 10.0  # every non-idle task stalled on I/O this share of the last 60 s: storage holds the node
STARVED_WORKERS = 1  # a trainer with this many DataLoader workers or fewer loads its batches (nearly) alone
CAUSES = (Cause.STORAGE_SLOW, Cause.CHECKPOINT_DISK_FULL, Cause.DATALOADER_STALL)
TOPICS = ("space", "mounts", "io_pressure", "loader", "blocked", "hung")


def storage_reads(checkpoint_dir: str) -> list[Read]:
    reads = [Read("space", "df-path", (("path", checkpoint_dir),))] if checkpoint_dir else []
    return reads + [
        Read("mounts", "findmnt-list"),
        Read("psi", "read-file", (("path", PSI_PATH),)),
        Read("procs", "ps-processes"),
        Read("dmesg", "dmesg"),
    ]


def judge_storage(hostname: str, checkpoint_dir: str, outputs: dict[str, tuple[bool, str, str]]) -> list[Observation]:
    """outputs: key -> (ran ok, output, command line). One observation per check, each citing its lines."""
    found: list[Observation] = []

    def failed(key: str, check: str) -> bool:
        ok, text, command = outputs.get(key, (False, "", ""))
        if not ok:
            found.append(
                Observation(check, "", EvidenceVerdict.COULD_NOT_RUN, f"could not run: {text[-200:]}", command)
            )
        return not ok

    if "space" in outputs:
        found.append(judge_space(hostname, *outputs["space"]))
    mounts = Mounts()
    if not failed("mounts", "mounts"):
        _, text, command = outputs["mounts"]
        try:
            mounts = parse_findmnt(text)
            found.append(_mounts(mounts, checkpoint_dir, command))
        except ParseError as error:
            found.append(Observation("mounts", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable: {error}", command))
    if not failed("psi", "io_pressure"):
        _, text, command = outputs["psi"]
        try:
            found.append(_pressure(parse_psi(text), text, command))
        except ParseError as error:
            found.append(Observation("io_pressure", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable: {error}", command))
    if not failed("procs", "loader"):
        _, text, command = outputs["procs"]
        try:
            found += _loader(parse_ps(text), text, command)
        except ParseError as error:
            found.append(Observation("loader", "", EvidenceVerdict.COULD_NOT_RUN, f"unreadable: {error}", command))
    if not failed("dmesg", "hung"):
        _, text, command = outputs["dmesg"]
        found.append(_hung(text, mounts, command))
    for seen in found:
        seen.hostname = hostname
    return found


def _mounts(mounts: Mounts, checkpoint_dir: str, command: str) -> Observation:
    remote = [mount for mount in mounts.mounts if mount.remote]
    holder = mounts.holding(checkpoint_dir) if checkpoint_dir else None
    parts = [f"{m.target} {m.fstype} from {m.server or m.source}" for m in remote]
    where = f"; {checkpoint_dir} is on {holder.target} ({holder.fstype}, {holder.source})" if holder else ""
    return Observation(
        "mounts",
        holder.target if holder else "",
        EvidenceVerdict.INFO,
        (f"network mounts: {', '.join(parts)}" if parts else "no network mount") + where,
        command,
        "\n".join(f"{m.target} {m.source} {m.fstype} {','.join(m.options)}" for m in remote)[:1000],
        data={
            "remote": [
                {"target": m.target, "source": m.source, "fstype": m.fstype, "server": m.server} for m in remote
            ],
            "checkpoint_mount": holder.target if holder else "",
            "hard": {m.target: m.option("hard") is not None for m in remote if m.fstype.startswith("nfs")},
        },
    )


def _pressure(stall, text: str, command: str) -> Observation:
    full = stall.full.avg60 if stall.full else 0.0
    high = full >= PRESSURE_FULL_PCT
    return Observation(
        "io_pressure",
        "io",
        EvidenceVerdict.FAULT if high else EvidenceVerdict.HEALTHY,
        f"I/O pressure: some {stall.some.avg10:.1f}% / full {full:.1f}% of the last 60 s"
        + (" — every task stalls on I/O: storage holds the node" if high else ""),
        command,
        text.strip(),
        data={"some_avg10": stall.some.avg10, "full_avg60": full, "threshold": PRESSURE_FULL_PCT},
    )


def _loader(processes, text: str, command: str) -> list[Observation]:
    """The trainers (python processes with DataLoader workers, or the launcher's children) and their workers."""
    agents = {p.pid for p in processes.processes if p.comm == "torchrun"}
    trainers = [p for p in processes.processes if p.ppid in agents and p.comm != WORKER_NAME]
    if not trainers:
        return [Observation("loader", "", EvidenceVerdict.INFO, "no trainer process on this node", command)]
    workers = {t.pid: [c for c in processes.children(t.pid) if c.comm == WORKER_NAME] for t in trainers}
    counts = [len(found) for found in workers.values()]
    typical = median(counts)
    starved = typical <= STARVED_WORKERS
    lines = text.splitlines()
    cited = [line for line in lines if any(line.split()[:1] == [str(t.pid)] for t in trainers[:2])]
    found = [
        Observation(
            "loader",
            counted(len(trainers), "trainer"),
            EvidenceVerdict.FAULT if starved else EvidenceVerdict.HEALTHY,
            f"{counted(len(trainers), 'trainer process', 'trainer processes')} with {min(counts)}–{max(counts)} "
            f"DataLoader {noun(max(counts), 'worker')} each"
            + (": the ranks load their batches (nearly) alone, a starved loader" if starved else ""),
            command,
            "\n".join(cited)[:1000],
            data={"trainers": len(trainers), "workers": counts, "starved_at": STARVED_WORKERS},
        )
    ]
    blocked = [c for found in workers.values() for c in found if c.uninterruptible]
    if blocked:
        found.append(
            Observation(
                "blocked",
                counted(len(blocked), "worker"),
                EvidenceVerdict.FAULT,
                f"{len(blocked)} of {sum(counts)} DataLoader workers wait in the kernel for I/O (state D)",
                command,
                "\n".join(line for line in lines if line.split()[:1] == [str(blocked[0].pid)]),
                data={"blocked": len(blocked), "pids": [c.pid for c in blocked[:16]]},
            )
        )
    return found


def _hung(text: str, mounts: Mounts, command: str) -> Observation:
    stalls = parse_storage_stalls(text).stalls
    servers = sorted({stall.server for stall in stalls if stall.server})
    named = [m for m in mounts.mounts if m.remote and m.server in servers]
    hung = [stall for stall in stalls if stall.kind == "hung_task"]
    if not stalls:
        return Observation(
            "hung", "", EvidenceVerdict.HEALTHY, "no storage server timeouts or hung tasks in the kernel log", command
        )
    what = [f"{m.target} ({m.fstype} from {m.source}) not responding" for m in named]
    what += [f"server {server} not responding" for server in servers if server not in {m.server for m in named}]
    if hung:
        what.append(
            f"{counted(len(hung), 'hung task')}, first {hung[0].task}:{hung[0].pid} blocked > {hung[0].seconds} s"
        )
    return Observation(
        "hung",
        named[0].target if named else (servers[0] if servers else ""),
        EvidenceVerdict.FAULT,
        "; ".join(what),
        command,
        "\n".join(stall.text for stall in stalls[:4]),
        data={
            "servers": servers,
            "mounts": [m.target for m in named],
            "sources": [m.source for m in named],
            "hung_tasks": len(hung),
            "lines": [stall.line for stall in stalls[:50]],
        },
    )


# --- the conclusion and what to do ---------------------------------------------------------------------------------


def conclude(scores: dict[str, int], strong: int) -> str:
    """The branch's cause ('' when none of its causes is strong enough: nothing found, said so)."""
    best = max(CAUSES, key=lambda cause: (scores.get(cause, 0), -CAUSES.index(cause)))
    return best if scores.get(best, 0) >= strong else ""


def fix_for(cause: str, observations: list[Observation]) -> tuple[str, list]:
    faulty = [seen for seen in observations if seen.verdict == EvidenceVerdict.FAULT]
    if cause == Cause.STORAGE_SLOW:
        hung = [seen for seen in faulty if seen.check == "hung"]
        where = "; ".join(f"{seen.hostname}: {seen.summary}" for seen in hung) or "; ".join(
            f"{seen.hostname}: {seen.summary}" for seen in faulty if seen.check in ("io_pressure", "blocked")
        )
        return (
            f"The storage the lagging ranks read is not answering ({where}): check that server and the network "
            "path to it (or the local array); the ranks go on once their reads complete, remount if the server "
            "was replaced",
            [],
        )
    if cause == Cause.CHECKPOINT_DISK_FULL:
        full = [seen for seen in faulty if seen.check in ("space", "disk")]
        where = "; ".join(f"{seen.hostname} {seen.summary}" for seen in full if seen.check == "space") or (
            ", ".join(sorted({seen.hostname for seen in full}))
        )
        return (
            f"The checkpoint volume is full ({where}): free space (the oldest checkpoints beyond the keep count) "
            "and resume from the newest valid checkpoint — runbook 3 (training interrupted) does both",
            [],
        )
    if cause == Cause.DATALOADER_STALL:
        hosts = ", ".join(sorted({seen.hostname for seen in faulty if seen.check == "loader"}))
        summary, commands = utilisation.fix_for(Cause.DATALOADER_STALL, [], {})
        return f"{summary} (starved on {hosts})" if hosts else summary, commands
    return "", []


def nothing_found(observations: list[Observation]) -> str:
    ran = sorted({seen.check for seen in observations if seen.verdict != EvidenceVerdict.COULD_NOT_RUN})
    missing = sorted({seen.check for seen in observations if seen.verdict == EvidenceVerdict.COULD_NOT_RUN})
    return (
        "Nothing found: the network checks and the storage / data-loader checks ("
        + (", ".join(ran) or "none")
        + ") show no fault on the lagging ranks' nodes"
        + (f"; could not run: {', '.join(missing)}" if missing else "")
        + ". Read the lagging ranks' own tracebacks (py-spy dump) before acting."
    )
