"""The scheduler's view of the nodes: recording what its controller answered, and how it differs from Rackpilot's.

`record_slurm_nodes()` stores what `scontrol show node` said (a readback job's hook calls it), only where it changed,
and sends `signals.scheduler_state_changed` for each change. `scheduler_differences()` reads the stored view against
the inventory (drained here but not there, drained there but not here, down, unknown to the scheduler): pages and
`/api/health/` show it. Each stored answer also records a node drained or down outside Rackpilot as a health event
(apps/schedulers/health_events.py). Both read nothing from the cluster themselves.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from apps.inventory.choices import NodeRole, NodeStatus
from apps.inventory.models import Node
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.parsers.slurm import SchedulerNodes
from apps.schedulers import health_events
from apps.schedulers.choices import DifferenceKind, DrainState, Scheduler
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.signals import scheduler_state_changed

COMPARED = ("present", "state", "flags", "drain_state", "reason", "reason_by", "reason_at")


def scheduled_nodes():
    """The nodes a scheduler should know: the inventory's compute nodes that are not retired."""
    return Node.objects.filter(role=NodeRole.COMPUTE).exclude(status=NodeStatus.RETIRED)


def _reason_time(text: str) -> datetime | None:
    """Slurm prints the controller's local time without a zone; it is read in Rackpilot's time zone."""
    if not text:
        return None
    try:
        return timezone.make_aware(datetime.fromisoformat(text))
    except ValueError:
        return None


def view_of(state: SchedulerNodeState | None) -> dict | None:
    return None if state is None else {name: getattr(state, name) for name in COMPARED}


@dataclass
class Recorded:
    changed: list[str]  # host names whose view changed (or was read for the first time)
    unchanged: int
    absent: list[str]  # inventory nodes the controller does not know


def record_slurm_nodes(*, listing: SchedulerNodes, read_at: datetime, job_id=None, only=None) -> Recorded:
    """Store the controller's answer for the inventory's scheduled nodes (`only`: just these host names, for a
    listing of some nodes). A node the listing lacks is recorded as not present. Nodes Slurm knows but the inventory
    does not are left out (nothing to store them on)."""
    seen = listing.by_name()
    nodes = scheduled_nodes()
    if only is not None:
        nodes = nodes.filter(hostname__in=list(only))
    nodes = list(nodes.select_related("scheduler_state"))
    result = Recorded([], 0, [])
    sent, rows = [], []
    with transaction.atomic():
        for node in nodes:
            found = seen.get(node.hostname)
            values = {
                "present": found is not None,
                "state": found.state if found else "",
                "flags": list(found.flags) if found else [],
                "drain_state": (found.drain_state.lower() if found else "") or DrainState.NONE,
                "reason": found.reason[:500] if found else "",
                "reason_by": found.reason_user[:64] if found else "",
                "reason_at": _reason_time(found.reason_time) if found else None,
            }
            if found is None:
                result.absent.append(node.hostname)
            current = getattr(node, "scheduler_state", None)
            before = view_of(current)
            if current is None:
                current = SchedulerNodeState(node=node, scheduler=Scheduler.SLURM)
            for name, value in values.items():
                setattr(current, name, value)
            current.read_at, current.read_by_job = read_at, job_id
            current.save()
            rows.append(current)
            if before == values:
                result.unchanged += 1
                continue
            result.changed.append(node.hostname)
            sent.append((node, before, values))
    for node, before, after in sent:  # after the commit: a listener reads what was stored
        transaction.on_commit(
            lambda node=node, before=before, after=after: scheduler_state_changed.send(
                sender=SchedulerNodeState, node=node, before=before, after=after
            )
        )
    health_events.record_scheduler_events(rows=rows)  # drained or down outside Rackpilot: health events
    return result


@dataclass(frozen=True)
class SchedulerDifference:
    """One way the scheduler's view of a node differs from Rackpilot's, with the scheduler's reason."""

    hostname: str
    kind: str  # a DifferenceKind
    scheduler: str
    state: str  # as the controller printed it: IDLE+DRAIN
    reason: str
    reason_by: str
    reason_at: datetime | None
    read_at: datetime | None

    @property
    def message(self) -> str:
        said = f": {self.reason}" if self.reason else ""
        by = f" (set by {self.reason_by}" + (f" at {self.reason_at:%Y-%m-%d %H:%M}" if self.reason_at else "") + ")"
        return f"{DifferenceKind(self.kind).label} ({self.state}){said}{by if self.reason_by else ''}"


def scheduler_differences(*, nodes=None) -> list[SchedulerDifference]:
    """What the scheduler's last answer says that Rackpilot does not expect, per node (all scheduled nodes, or the
    queryset `nodes`): drained there but in service here (drained outside Rackpilot), drained here but in service
    there, down or not responding there, or unknown there. Nodes never read back are left out. Reads only."""
    queryset = scheduled_nodes() if nodes is None else nodes
    rows = SchedulerNodeState.objects.filter(node__in=queryset).select_related("node").order_by("node__hostname")
    return [difference for row in rows for difference in differences_of(row)]


def differences_of(row: SchedulerNodeState) -> list[SchedulerDifference]:
    """How one stored view differs from its node in the inventory (row.node: the node, loaded with the row)."""
    kinds = []
    if not row.present:
        kinds.append(DifferenceKind.ABSENT)
    else:
        if row.drained and not row.node.is_drained:
            kinds.append(DifferenceKind.DRAINED_OUTSIDE)
        if row.node.is_drained and not row.drained:
            kinds.append(DifferenceKind.NOT_DRAINED)
        if row.down:
            kinds.append(DifferenceKind.DOWN)
    return [
        SchedulerDifference(
            hostname=row.node.hostname,
            kind=kind,
            scheduler=row.scheduler,
            state=row.state_text,
            reason=row.reason,
            reason_by=row.reason_by,
            reason_at=row.reason_at,
            read_at=row.read_at,
        )
        for kind in kinds
    ]


def scheduler_controller() -> Node | None:
    """The node the scheduler's commands run on: RACKPILOT_SCHEDULER_CONTROLLER, else the first management node."""
    if settings.RACKPILOT_SCHEDULER_CONTROLLER:
        return Node.objects.filter(hostname=settings.RACKPILOT_SCHEDULER_CONTROLLER).first()
    return Node.objects.filter(role=NodeRole.MANAGEMENT).order_by("hostname").first()


def start_readback(*, requested_by=None, transport: str | None = None):
    """Starts the scheduler-readback job on the controller; raises serializers.ValidationError (nothing created)
    when there is none."""
    controller = scheduler_controller()
    if controller is None:
        raise serializers.ValidationError(
            {"targets": "No scheduler controller: set RACKPILOT_SCHEDULER_CONTROLLER or add a management node."}
        )
    return create_job(
        kind="scheduler-readback",
        targets=TargetSpec(nodes=(controller.hostname,)),
        parameters={},
        requested_by=requested_by,
        transport=transport,
    )


def start_periodic_readback() -> str:
    """What beat's readback does, and why not when it does nothing (the task's result, for its log)."""
    if settings.RACKPILOT_SCHEDULER_KIND != Scheduler.SLURM:
        return "not slurm"
    if scheduler_controller() is None:
        return "no controller"
    if Job.objects.filter(kind="scheduler-readback", status__in=JOB_ACTIVE).exists():
        return "still running"
    return str(start_readback().public_id)
