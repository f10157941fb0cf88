"""The scheduler's view of the nodes: recording what its controller answered, and how it differs from Rackpilot's.

`record_slurm_nodes()` stores what `scontrol show node` said and `record_kubernetes_nodes()` what the API server's
Node objects say (a readback job's hook calls them), and send `signals.scheduler_state_changed` for each node whose
view changed. Each stored answer also records a node drained or down outside Rackpilot as a health event
(apps/schedulers/health_events.py). `scheduler_differences()` reads the stored view against the inventory (drained
here but not there, drained there but not here, down, unknown to the scheduler): pages and `/api/health/` show it.
Both read nothing from the cluster themselves.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import serializers

from apps.inventory.choices import NodeRole, NodeStatus
from apps.inventory.models import Node
from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.parsers.kubernetes import KubernetesNode, KubernetesNodes, NodeTaint
from apps.parsers.slurm import SchedulerNodes
from apps.schedulers import health_events
from apps.schedulers.choices import DifferenceKind, DrainState, Scheduler
from apps.schedulers.commands import QUARANTINE_KEY
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.signals import scheduler_state_changed

COMPARED = (
    "scheduler",
    "present",
    "state",
    "flags",
    "drain_state",
    "reason",
    "reason_by",
    "reason_at",
    "taints",
    "conditions",
)
# Taints that keep no work off a node Rackpilot would call in service: Kubernetes' own (node.kubernetes.io/…, set
# from a cordon or a condition, which the state shows already; node-role.kubernetes.io/…, a control plane's) and the
# GPU nodes' usual dedication taint (only pods asking for GPUs land there).
OWN_TAINT_PREFIXES = ("node.kubernetes.io/", "node-role.kubernetes.io/")
DEDICATION_TAINTS = ("nvidia.com/gpu",)


def scheduled_nodes():
    """The nodes a scheduler should know: the inventory's compute nodes that are not retired."""
    return Node.objects.filter(role=NodeRole.COMPUTE).exclude(status=NodeStatus.RETIRED)


def _reason_time(text: str) -> datetime | None:
    """Slurm prints the controller's local time without a zone; it is read in Rackpilot's time zone. Kubernetes'
    times carry their zone (UTC)."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at if timezone.is_aware(at) else timezone.make_aware(at)


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
    values = {
        name: {
            "present": True,
            "state": found.state,
            "flags": list(found.flags),
            "drain_state": found.drain_state.lower() or DrainState.NONE,
            "reason": found.reason[:500],
            "reason_by": found.reason_user[:64],
            "reason_at": _reason_time(found.reason_time),
            "taints": [],
            "conditions": [],
        }
        for name, found in seen.items()
    }
    return _record(Scheduler.SLURM, values, read_at=read_at, job_id=job_id, only=only)


def holds_work_off(taint: NodeTaint) -> bool:
    """A taint that keeps new pods off the node (or evicts them) and says something Rackpilot does not expect."""
    return (
        taint.effect in {"NoSchedule", "NoExecute"}
        and not taint.key.startswith(OWN_TAINT_PREFIXES)
        and taint.key not in DEDICATION_TAINTS
    )


def kubernetes_view(found: KubernetesNode) -> dict:
    """A Node object as the stored view: the Ready condition as the state (Ready, NotReady, Unknown), cordoned as
    SchedulingDisabled (kubectl's word) and each problem condition as flags, drained when cordoned or tainted to keep
    work off, the reason those taints and conditions (Kubernetes keeps no reason for a cordon)."""
    held_off = [taint for taint in found.taints if holds_work_off(taint)]
    problems = found.problems
    state = {"True": "Ready", "False": "NotReady"}.get(found.ready, "Unknown")
    ready = next((condition for condition in found.conditions if condition.type == "Ready"), None)
    reasons = [taint.text for taint in held_off]
    reasons += [f"{condition.type}: {condition.message or condition.reason}" for condition in problems]
    if state != "Ready" and ready is not None:
        reasons.append(f"{state}: {ready.message or ready.reason}")
    stamps = [taint.time_added for taint in held_off] + [condition.since for condition in problems]
    return {
        "present": True,
        "state": state,
        "flags": (["SchedulingDisabled"] if found.unschedulable else []) + [condition.type for condition in problems],
        "drain_state": DrainState.DRAINED if found.unschedulable or held_off else DrainState.NONE,
        "reason": "; ".join(reasons)[:500],
        "reason_by": "",
        "reason_at": next((_reason_time(stamp) for stamp in stamps if stamp), None),
        "taints": [taint.to_dict() for taint in found.taints],
        "conditions": [condition.to_dict() for condition in found.conditions],
    }


def record_kubernetes_nodes(*, listing: KubernetesNodes, read_at: datetime, job_id=None, only=None) -> Recorded:
    """Store the API server's Node objects for the inventory's scheduled nodes, as record_slurm_nodes does."""
    values = {name: kubernetes_view(found) for name, found in listing.by_name().items()}
    return _record(Scheduler.KUBERNETES, values, read_at=read_at, job_id=job_id, only=only)


def is_drained(node) -> bool:
    """A listed node (Slurm's or Kubernetes') is kept from new work."""
    if isinstance(node, KubernetesNode):
        return node.unschedulable or any(holds_work_off(taint) for taint in node.taints)
    return node.drained


def is_quarantined(view: SchedulerNodeState | dict) -> bool:
    """Kubernetes: the node carries Rackpilot's quarantine taint."""
    taints = view["taints"] if isinstance(view, dict) else view.taints
    return any(taint.get("key") == QUARANTINE_KEY for taint in taints)


ABSENT = {
    "present": False,
    "state": "",
    "flags": [],
    "drain_state": DrainState.NONE,
    "reason": "",
    "reason_by": "",
    "reason_at": None,
    "taints": [],
    "conditions": [],
}


def _record(scheduler: str, seen: dict[str, dict], *, read_at: datetime, job_id, only) -> Recorded:
    nodes = scheduled_nodes()
    if only is not None:
        nodes = nodes.filter(hostname__in=list(only))
    nodes = list(nodes.select_related("scheduler_state"))
    result = Recorded([], 0, [])
    sent, rows = [], []
    with transaction.atomic():
        for node in nodes:
            values = {"scheduler": scheduler, **seen.get(node.hostname, ABSENT)}
            if node.hostname not in seen:
                result.absent.append(node.hostname)
            current = getattr(node, "scheduler_state", None)
            before = view_of(current)
            if current is None:
                current = SchedulerNodeState(node=node)
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
    rows = SchedulerNodeState.objects.filter(_may_differ(), node__in=queryset)
    rows = rows.select_related("node").order_by("node__hostname")
    return [difference for row in rows for difference in differences_of(row)]


def _may_differ() -> Q:
    """The rows in which differences_of can find something (it decides): left out are the Slurm nodes in service on
    both sides with no flag, most of a fleet, so that a fleet's health reads only the few that say something."""
    drained_there = ~Q(drain_state=DrainState.NONE)
    drained_here = Q(node__drained_at__isnull=False)
    return (
        Q(present=False)
        | Q(scheduler=Scheduler.KUBERNETES)  # its conditions are judged in Python
        | Q(state="DOWN")
        | ~Q(flags=[])  # NOT_RESPONDING, DRAIN, …
        | (drained_there & ~drained_here)
        | (drained_here & ~drained_there)
    )


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
        if row.problem_conditions:
            kinds.append(DifferenceKind.CONDITION)
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


def start_readback(*, requested_by=None, transport: str | None = None, scheduler: str | None = None):
    """Starts the scheduler-readback job on the controller (of `scheduler`, default RACKPILOT_SCHEDULER_KIND);
    raises serializers.ValidationError (nothing created) when there is none."""
    controller = scheduler_controller()
    if controller is None:
        raise serializers.ValidationError(
            {"targets": "No scheduler controller: set RACKPILOT_SCHEDULER_CONTROLLER or add a management node."}
        )
    return create_job(
        kind="scheduler-readback",
        targets=TargetSpec(nodes=(controller.hostname,)),
        parameters={"scheduler": scheduler or settings.RACKPILOT_SCHEDULER_KIND},
        requested_by=requested_by,
        transport=transport,
    )


def start_periodic_readback() -> str:
    """What beat's readback does, and why not when it does nothing (the task's result, for its log)."""
    if settings.RACKPILOT_SCHEDULER_KIND not in Scheduler.values:
        return "no scheduler"
    if scheduler_controller() is None:
        return "no controller"
    if Job.objects.filter(kind="scheduler-readback", status__in=JOB_ACTIVE).exists():
        return "still running"
    return str(start_readback().public_id)
