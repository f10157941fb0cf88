"""The nodes a hung or slowed training job waits for, named by the watch the moment it opens the incident
(apps/diagnosis/training_watch.py), from what Rackpilot already holds, before its runbook reads anything:

- the newest stored read of the job's log (node rank 0's tail, kept by the last `training-progress` read): the
  watchdog's lagging ranks (least NCCL work enqueued, when the log holds more than one node's ranks), the ranks a
  desync report or the flight recorder says never joined or did not finish the collective, and the ranks or nodes
  with NET/IB or CUDA errors, each mapped to its node through the job's rank map, as the runbook's log phase reads
  every node's log (apps/diagnosis/runbook.py);
- open health events on the job's nodes (critical or major, seen since shortly before the episode began): a node
  that stopped answering (node_unreachable), an XID, a link down. A node with one is the likely laggard.

Each named node comes with the evidence it stands on: the log's lines, or the event. Reads only; the watch records.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from apps.diagnosis.choices import EvidenceVerdict
from apps.diagnosis.runbook import Observation, judge_log, lagging, suspects
from apps.health.choices import Severity
from apps.health.models import HealthEvent
from apps.jobs.models import Artifact
from apps.parsers.triage import triage
from apps.workloads.models import TrainingJob

# The progress read's kind (apps/monitoring/progress.KIND, a layer above: named here, not imported).
PROGRESS_READ = "training-progress"
# A node that stopped answering (apps/monitoring/reachability.KIND, a layer above, from the kernel-log reads).
UNREACHABLE = "node_unreachable"
# An event seen this long before the episode began may be what began it (the kernel-log probe reads every 5 min).
LOOKBACK = timedelta(minutes=15)
NODE_SEVERITIES = (Severity.CRITICAL, Severity.MAJOR)


@dataclass
class Laggards:
    hosts: list[str] = field(default_factory=list)  # in the job's node-rank order
    from_log: list[Observation] = field(default_factory=list)  # they cite `log`
    from_events: list[Observation] = field(default_factory=list)
    log: Artifact | None = None  # the stored log read


def rank_places(job: TrainingJob) -> dict[int, tuple[str, int]]:
    """Global rank -> (host name, local GPU index), in torchrun's order."""
    return {rank: (node.hostname, local) for rank, node, local in job.rank_map()}


def name_laggards(*, job: TrainingJob, since: datetime, now: datetime) -> Laggards:
    """The job's nodes its stored log or its open health events single out, with the evidence for each."""
    places = rank_places(job)
    members = list(job.members.select_related("node").order_by("node_rank"))
    found = Laggards()
    found.log = newest_log_read(job, now=now)
    hosts: set[str] = set()
    if found.log is not None:
        found.from_log = from_log(found.log, places, log_path=job.log_path)
        hosts |= set(suspects(found.from_log, places))
    found.from_events = from_events([member.node for member in members], since=since, now=now)
    hosts |= {seen.hostname for seen in found.from_events}
    found.hosts = [member.node.hostname for member in members if member.node.hostname in hosts]
    return found


def newest_log_read(job: TrainingJob, *, now: datetime) -> Artifact | None:
    """The newest stored read of the job's log by then (the progress read's output), or None."""
    return (
        Artifact.objects.filter(
            stream="stdout",
            step__job__kind=PROGRESS_READ,
            step__job__parameters__training_job=str(job.public_id),
            created__lte=now,
        )
        .select_related("step")
        .order_by("-created", "-id")
        .first()
    )


def from_log(artifact: Artifact, places: dict[int, tuple[str, int]], *, log_path: str) -> list[Observation]:
    """What the stored log says of who is behind: the runbook's reading of one node's log, the lag across the ranks
    it holds, and the ranks a desync report or the flight recorder names. Only faults: a clean log names no one."""
    hostname = artifact.step.hostname
    text = artifact.text()
    command = f"{hostname}: the newest progress read of {log_path} ({artifact.created.isoformat(timespec='seconds')})"
    seen = [o for o in judge_log(hostname, text, command, places) if o.verdict == EvidenceVerdict.FAULT]
    behind = lagging(seen, places)
    if behind is not None:
        seen.append(behind)
    seen += not_joined(text, places, hostname=hostname, command=command)
    return seen


def not_joined(text: str, places: dict[int, tuple[str, int]], *, hostname: str, command: str) -> list[Observation]:
    """The ranks a desync report (TORCH_NCCL_DESYNC_DEBUG) or the flight recorder names as never joining, or not
    finishing, the collective the others wait in, as a `lag` observation on their nodes."""
    found = []
    for finding in triage(text).findings:
        ranks = finding.ranks if finding.problem == "collective_not_joined" else []
        if not ranks:
            continue
        hosts = sorted({places[rank][0] for rank in ranks if rank in places})
        found.append(
            Observation(
                check="lag",
                subject=f"ranks {', '.join(map(str, ranks))}"[:64],
                verdict=EvidenceVerdict.FAULT,
                summary=f"{finding.detail} ({', '.join(hosts) or 'no node of the job holds them'})"[:300],
                command=command,
                excerpt="\n".join(finding.excerpt[:4]),
                hostname=hosts[0] if len(hosts) == 1 else hostname,
                data={"ranks": ranks, "hosts": hosts, "lines": finding.lines},
            )
        )
    return found


def from_events(nodes, *, since: datetime, now: datetime) -> list[Observation]:
    """One observation per open critical or major health event on the nodes seen since shortly before `since`."""
    events = (
        HealthEvent.objects.open()
        .filter(node__in=nodes, severity__in=NODE_SEVERITIES, first_seen__lte=now, last_seen__gte=since - LOOKBACK)
        .select_related("node")
        .order_by("node__hostname", "first_seen", "id")
    )
    return [
        Observation(
            check="health",
            subject=event.kind[:64],
            verdict=EvidenceVerdict.FAULT,
            summary=f"open {event.get_severity_display().lower()} event since "
            f"{event.first_seen.isoformat(timespec='seconds')}: {event.summary}"[:300],
            command=f"health event {event.public_id} ({event.get_source_display()})",
            excerpt="\n".join(_lines(event)),
            hostname=event.node.hostname,
            data={"event": str(event.public_id), "kind": event.kind, "severity": event.severity},
        )
        for event in events
    ]


def _lines(event: HealthEvent) -> list[str]:
    """The newest observation's lines of an event, as its producer kept them (an error line, log lines)."""
    newest = event.evidence[-1] if event.evidence else {}
    lines = newest.get("lines") or ([newest["error"]] if newest.get("error") else [])
    return [str(line) for line in lines][:4]
