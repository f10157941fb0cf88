"""What failures cost: per health event the GPU-hours lost (the work its training jobs redo since their last checkpoint,
and the time its node spent drained), per component type the mean time between failures, and the nodes and parts
that cost the most (docs/health.md, "Failure costs"). Reads only, worked out from the records on each read:

- Work lost: each training job that held the event's node when it was first seen, at the newest step its log had
  reached by then (TrainingProgress), loses the steps since its last checkpoint (the step modulo
  `checkpoint_interval_steps`) × that point's `seconds_per_step`, on every one of its GPUs (members × ranks per node).
  A job whose newest step before the event is older than one checkpoint interval of its steps was not running.
- Quarantine: each drain of the node (the audit log's `drained_at` changes, and the node's drain now) that began
  while the event was open, from the drain to the node's return (still drained: to `now`) × the node's GPUs. A drain
  whose reason names a kind (remediation's "rackpilot <kind>: …") belongs to the events of that kind; another belongs
  to every event open when it began. Totals count a job's lost work once per checkpoint (the furthest step it
  reached past it) and a drain once.
- SLO budget burned: the SLOs live above this app (monitoring); it fills `SLO_BURN` from its AppConfig.ready(). With
  nothing registered the cost says "not measured".
"""

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncSecond

from apps.core.models import AuditEntry
from apps.core.text import counted
from apps.health.choices import ComponentType, Severity
from apps.health.models import HealthEvent
from apps.inventory.choices import NodeRole
from apps.inventory.models import Cable, Gpu, Nic, Node, NvlinkSwitchTray, Switch, Volume
from apps.workloads.models import TrainingJob, TrainingProgress

HOUR = 3600.0
FAILURES = (Severity.CRITICAL, Severity.MAJOR)  # what counts as a failure for the MTBF and the lemons
DRAIN_KIND = re.compile(r"^rackpilot ([a-z0-9][a-z0-9_-]*):")  # remediation's drain reason (services.slurm_reason)

# (events, now) -> {event pk: [{"slo", "budget_percent", "note"}...]}; filled by an app above (monitoring), read here.
SLO_BURN: list[Callable[[list[HealthEvent], datetime], dict[int, list[dict]]]] = []


def register_slo_burn(function: Callable[[list[HealthEvent], datetime], dict[int, list[dict]]]) -> None:
    SLO_BURN[:] = [function]


@dataclass(frozen=True)
class Loss:
    """One part of a failure's cost: a job's lost work, or a node's time out of service."""

    what: str  # "work" or "quarantine"
    key: tuple  # the same loss seen from two events has the same key: totals count it once
    gpu_hours: float
    gpus: int
    seconds: float
    detail: str


@dataclass
class FailureCost:
    event: HealthEvent
    losses: list[Loss] = field(default_factory=list)
    slo: list[dict] | None = None  # None: not measured

    @property
    def gpu_hours_lost(self) -> float:
        return total_gpu_hours([self])

    @property
    def work(self) -> list[Loss]:
        return [loss for loss in self.losses if loss.what == "work"]

    @property
    def quarantine(self) -> list[Loss]:
        return [loss for loss in self.losses if loss.what == "quarantine"]


def total_gpu_hours(costs: Iterable[FailureCost]) -> float:
    """The GPU-hours the costs lost together, each loss once (two events of one outage share a drain): seen at
    several moments (a job's work since one checkpoint, at two steps it reached), its largest."""
    seen = {}
    for cost in costs:
        for loss in cost.losses:
            seen[loss.key] = max(seen.get(loss.key, 0.0), loss.gpu_hours)
    return sum(seen.values())


def _parse(value) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def drains(nodes: list[Node], *, now: datetime) -> dict[int, list[tuple[datetime, datetime, str]]]:
    """(start, end, reason) of each drain of the nodes, oldest first, from the audit log; a node drained now whose drain
    the log does not hold (made before it was audited) from its `drained_at` to `now`."""
    by_node: dict[int, list[list]] = defaultdict(list)
    entries = AuditEntry.objects.filter(
        object_type=Node._meta.label_lower, object_id__in=[str(node.pk) for node in nodes]
    ).order_by("created", "id")
    for entry in entries.only("created", "object_id", "changes"):
        changes = entry.changes or {}
        if "drained_at" not in changes:
            continue
        _, after = changes["drained_at"]
        reason = (changes.get("drain_reason") or ["", ""])[1] or ""
        rows = by_node[int(entry.object_id)]
        open_row = rows[-1] if rows and rows[-1][1] is None else None
        if after is None:  # undrained: the return
            if open_row is not None:
                open_row[1] = entry.created
        elif open_row is None:
            rows.append([_parse(after), None, reason])
        elif reason:  # drained again while drained: the same drain, a newer reason
            open_row[2] = reason
    result = {}
    for node in nodes:
        rows = by_node.get(node.pk, [])
        if node.drained_at is not None and not (rows and rows[-1][1] is None):
            rows.append([node.drained_at, None, node.drain_reason])
        result[node.pk] = [(start, end or now, reason) for start, end, reason in rows if start is not None]
    return result


def _event_end(event: HealthEvent, now: datetime) -> datetime:
    return event.cleared_at if event.cleared_at is not None and event.cleared_at < now else now


def _owns(event: HealthEvent, start: datetime, reason: str, open_kinds: set[str]) -> bool:
    """Whether a drain that began at `start` belongs to the event."""
    if not event.first_seen <= start <= _event_end(event, start):
        return False
    named = DRAIN_KIND.match(reason or "")
    if named and named.group(1) in open_kinds:
        return named.group(1) == event.kind
    return True


def _jobs_on(nodes: list[Node]) -> dict[int, list[TrainingJob]]:
    """node pk → the training jobs that hold or held it (members now, or an earlier placement naming it)."""
    hostnames = {node.hostname: node.pk for node in nodes}
    jobs = TrainingJob.objects.filter(Q(members__node__in=nodes) | ~Q(placements=[])).distinct()
    by_node: dict[int, list[TrainingJob]] = defaultdict(list)
    for job in jobs.prefetch_related("members__node"):
        job.member_pks = {member.node_id for member in job.members.all()}
        job.gpus = len(job.member_pks) * job.ranks_per_node
        held = set(job.member_pks)
        for placement in job.placements or []:
            held |= {hostnames[h] for h in placement.get("hosts", []) if h in hostnames}
        for pk in held & set(hostnames.values()):
            by_node[pk].append(job)
    return by_node


def _held_at(job: TrainingJob, node: Node, at: datetime) -> bool:
    """Whether the job held the node at `at`: the placement in force then (an earlier one, or its members now)."""
    for placement in job.placements or []:
        until = _parse(placement.get("until"))
        if until is not None and at < until:
            return node.hostname in placement.get("hosts", [])
    return node.pk in job.member_pks


def work_lost(job: TrainingJob, *, at: datetime, gpus: int | None = None) -> Loss | None:
    """The job's work since its last checkpoint at `at`, on all its GPUs (members × ranks per node unless given);
    None when it was not running then."""
    gpus = gpus if gpus is not None else job.members.count() * job.ranks_per_node
    if job.started_at is not None and job.started_at > at:
        return None
    point = TrainingProgress.objects.filter(job=job, time__lte=at).order_by("-time", "-step").first()
    if point is None or not point.seconds_per_step:
        return None
    interval = job.checkpoint_interval_steps
    if at - point.time > timedelta(seconds=interval * point.seconds_per_step):
        return None  # nothing logged for a whole checkpoint interval: it was not running
    steps = point.step % interval
    seconds = steps * point.seconds_per_step
    checkpoint = point.step - steps
    return Loss(
        "work",
        ("work", job.pk, checkpoint),
        seconds * gpus / HOUR,
        gpus,
        seconds,
        f"{job.name}: {counted(steps, 'step')} since the checkpoint at step {checkpoint}, "
        f"{point.seconds_per_step:g} s each, on {gpus} GPUs",
    )


def failure_costs(events: Iterable[HealthEvent], *, now: datetime, slo: bool = False) -> dict[int, FailureCost]:
    """Each event's cost, by its pk: a few queries for all of them, and one per (job, event) for the job's step."""
    events = list(events)
    costs = {event.pk: FailureCost(event) for event in events}
    nodes = {event.node_id: event.node for event in events if event.node_id is not None}
    if nodes:
        node_list = list(nodes.values())
        gpus = dict(Gpu.objects.filter(node__in=node_list).values_list("node_id").annotate(n=Count("pk")).order_by())
        node_drains = drains(node_list, now=now)
        jobs = _jobs_on(node_list)
        open_kinds_at = _open_kinds(node_list, node_drains)
        for event in events:
            if event.node_id is None or event.first_seen > now:
                continue
            cost, node = costs[event.pk], nodes[event.node_id]
            for job in jobs.get(node.pk, []):
                if _held_at(job, node, event.first_seen):
                    loss = work_lost(job, at=event.first_seen, gpus=job.gpus)
                    if loss is not None:
                        cost.losses.append(loss)
            count = gpus.get(node.pk, 0)
            for start, end, reason in node_drains[node.pk]:
                if _owns(event, start, reason, open_kinds_at.get((node.pk, start), set())):
                    seconds = max(0.0, (end - start).total_seconds())
                    cost.losses.append(
                        Loss(
                            "quarantine",
                            ("quarantine", node.pk, start),
                            seconds * count / HOUR,
                            count,
                            seconds,
                            f"{node.hostname} drained {start:%Y-%m-%d %H:%M} to "
                            f"{'now' if end >= now else f'{end:%Y-%m-%d %H:%M}'}, {count} GPUs",
                        )
                    )
    if slo and SLO_BURN:
        for pk, burns in SLO_BURN[0](events, now).items():
            if pk in costs:
                costs[pk].slo = burns
    return costs


def _open_kinds(nodes: list[Node], node_drains: dict) -> dict[tuple[int, datetime], set[str]]:
    """(node pk, drain start) → the kinds of the node's events open when the drain began (one query)."""
    starts = [(pk, start) for pk, rows in node_drains.items() for start, _, _ in rows]
    if not starts:
        return {}
    events = HealthEvent.objects.filter(node__in=nodes, first_seen__lte=max(s for _, s in starts)).only(
        "node_id", "kind", "first_seen", "cleared_at"
    )
    kinds: dict[tuple[int, datetime], set[str]] = defaultdict(set)
    for event in events:
        for pk, start in starts:
            if (
                pk == event.node_id
                and event.first_seen <= start
                and (event.cleared_at is None or event.cleared_at >= start)
            ):
                kinds[(pk, start)].add(event.kind)
    return kinds


def failure_cost(event: HealthEvent, *, now: datetime, slo: bool = True) -> FailureCost:
    return failure_costs([event], now=now, slo=slo)[event.pk]


# --- reliability: MTBF per component type, and the lemons ----------------------------------------------------------

# The inventory rows each component type counts for its operating hours (BMC: one per compute node).
POPULATION = {
    ComponentType.GPU: lambda: Gpu.objects.filter(node__role=NodeRole.COMPUTE),
    ComponentType.NIC: lambda: Nic.objects.filter(node__role=NodeRole.COMPUTE),
    ComponentType.CABLE: lambda: Cable.objects.all(),
    ComponentType.NODE: lambda: Node.objects.filter(role=NodeRole.COMPUTE),
    ComponentType.BMC: lambda: Node.objects.filter(role=NodeRole.COMPUTE),
    ComponentType.SWITCH: lambda: Switch.objects.all(),
    ComponentType.VOLUME: lambda: Volume.objects.all(),
    ComponentType.NVLINK_SWITCH_TRAY: lambda: NvlinkSwitchTray.objects.all(),
}


RELIABILITY_WINDOWS = {"7d": 7, "30d": 30, "90d": 90}  # days; the reliability page's and API's choices
RELIABILITY_DEFAULT = "30d"


def reliability(*, window: str, now: datetime) -> dict:
    """The reliability page's and /api/reliability/'s content over the window ending at `now`."""
    since = now - timedelta(days=RELIABILITY_WINDOWS[window])
    return {
        "window": window,
        "since": since,
        "until": now,
        "mtbf": mtbf(since=since, until=now),
        **lemons(since=since, until=now),
    }


def _operating_hours(rows, *, since: datetime, until: datetime) -> float:
    """Hours each row existed in the window (from its creation, when that falls inside), added up. Counted by the
    second of creation in the database: a fleet's hundreds of thousands of parts were made in a few thousand."""
    created = rows.filter(created__lt=until).annotate(second=TruncSecond("created")).order_by()
    hours = 0.0
    for second, count in created.values_list("second").annotate(count=Count("pk")):
        hours += count * (until - max(since, second)).total_seconds() / HOUR
    return hours


def failures(*, since: datetime, until: datetime):
    """The window's failures: critical and major events first seen in it."""
    return HealthEvent.objects.filter(severity__in=FAILURES, first_seen__gte=since, first_seen__lt=until)


def mtbf(*, since: datetime, until: datetime) -> list[dict]:
    """Per component type: its fleet's operating hours in the window, the failures, and their quotient (None: no
    failure, or no inventory to count hours on, as for switch ports)."""
    counts = dict(failures(since=since, until=until).values_list("component_type").annotate(n=Count("pk")).order_by())
    rows = []
    for value, label in ComponentType.choices:
        population = POPULATION.get(value)
        hours = _operating_hours(population(), since=since, until=until) if population else None
        count = counts.get(value, 0)
        rows.append(
            {
                "component_type": value,
                "label": label,
                "operating_hours": hours,
                "failures": count,
                "mtbf_hours": hours / count if hours is not None and count else None,
            }
        )
    return rows


def lemons(*, since: datetime, until: datetime, count: int = 10) -> dict:
    """The nodes and the parts whose failures in the window cost the most GPU-hours, then the most failures."""
    events = list(failures(since=since, until=until).select_related("node", "gpu").order_by("first_seen", "pk"))
    costs = failure_costs(events, now=until)
    by_node: dict[int, dict] = {}
    by_part: dict[str, dict] = {}
    for event in events:
        cost = costs[event.pk]
        if event.node_id is not None:
            row = by_node.setdefault(event.node_id, {"node": event.node, "costs": [], "failures": 0})
            row["costs"].append(cost)
            row["failures"] += 1
        if event.component_type != ComponentType.NODE:
            serial = event.gpu.serial if event.gpu_id else ""
            row = by_part.setdefault(
                event.component_key,
                {
                    "component_type": event.component_type,
                    "component": event.component_label,
                    "serial": serial,
                    "node": event.node,
                    "costs": [],
                    "failures": 0,
                },
            )
            row["costs"].append(cost)
            row["failures"] += 1

    def ranked(rows) -> list[dict]:
        for row in rows:
            row["gpu_hours_lost"] = total_gpu_hours(row.pop("costs"))
        return sorted(rows, key=lambda r: (-r["gpu_hours_lost"], -r["failures"], str(r.get("component") or r["node"])))[
            :count
        ]

    return {"nodes": ranked(list(by_node.values())), "parts": ranked(list(by_part.values()))}
