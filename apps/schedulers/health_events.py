"""The scheduler's node states as health events (apps/health): a node the scheduler's readback shows drained, down or
failed while Rackpilot has it in service is a `scheduler_drained` event on the node, source `scheduler`, with
Slurm's reason (minor while it is only drained, major when it is down, failed or not responding). The same answer
read again folds into the event (its evidence equal, counted once).

The scheduler is the authority for this kind: when a later readback shows the node back in service (resumed, up),
its open `scheduler_drained` event is cleared as validated by that readback. Nodes Rackpilot drained itself (its
remediation's quarantine) make no event here: their own events say why; a node being rebooted through the scheduler,
or powered off through its BMC (`Node.power_state`), is down on purpose and makes none either."""

from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.schedulers.choices import DifferenceKind
from apps.schedulers.models import SchedulerNodeState

KIND = "scheduler_drained"
REBOOTING = {"REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERING_UP", "POWERING_DOWN"}


def _out_of_service(row: SchedulerNodeState) -> bool:
    """Drained, down, failed or not responding in the scheduler while in service in Rackpilot. A node its BMC reads
    powered off (a leak's trays, an operator's power-off) is down on purpose: not responding is what off looks like."""
    if not row.present or row.node.is_drained or row.node.is_powered_off or REBOOTING & set(row.flags):
        return False
    return row.drained or row.down or row.state == "FAIL" or "FAIL" in row.flags


def record_scheduler_events(*, rows: list[SchedulerNodeState]) -> list[HealthEvent]:
    """An event per node the rows show out of service outside Rackpilot; the open event of a node they show back in
    service cleared. Returns the events recorded or folded."""
    recorded = []
    back = []
    for row in rows:
        if _out_of_service(row):
            recorded.append(_record(row))
        elif row.present and not (row.drained or row.down):
            back.append(row)
    if back:
        opened = set(
            HealthEvent.objects.open()
            .filter(kind=KIND, node__in=[row.node for row in back])
            .values_list("node_id", flat=True)
        )
        for row in back:
            if row.node_id in opened:
                health.clear_validated(
                    node=row.node,
                    kinds=[KIND],
                    validation={"scheduler": row.scheduler, "state": row.state_text, "job": _job(row)},
                    reason=f"the scheduler shows the node in service again ({row.state_text})",
                    at=row.read_at,
                )
    return recorded


def _job(row: SchedulerNodeState) -> str:
    return str(row.read_by_job) if row.read_by_job else ""


def _record(row: SchedulerNodeState) -> HealthEvent:
    failed = row.down or row.state == "FAIL" or "FAIL" in row.flags
    what = DifferenceKind.DOWN.label if failed else DifferenceKind.DRAINED_OUTSIDE.label
    said = f": {row.reason}" if row.reason else ""
    by = f" (set by {row.reason_by})" if row.reason_by else ""
    return health.record_event(
        component=row.node,
        source=Source.SCHEDULER,
        kind=KIND,
        severity=Severity.MAJOR if failed else Severity.MINOR,
        summary=f"{row.node.hostname}: {what} ({row.state_text}){said}{by}"[:300],
        evidence={
            "scheduler": row.scheduler,
            "state": row.state_text,
            "reason": row.reason,
            "reason_by": row.reason_by,
            "reason_at": row.reason_at.isoformat() if row.reason_at else "",
        },
        at=row.read_at,
    )
