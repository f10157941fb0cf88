"""A repair's passed validation resolves the incidents whose faults it fixed: the active incidents named by the
evidence of the repair's health events (a runbook's finding records the incident on the event it makes). Once the
node is back in service, an incident about it still waiting on the hands-on fix the repair was (a GPU lost, a link
down) goes through its runbook's re-check, which resolves it only if the node checks clean. Listens to remediation's
`repair_validated` and `repair_returned` (docs/health.md, "Repair and return")."""

from django.db import transaction
from django.utils import timezone

from apps.diagnosis.choices import INCIDENT_ACTIVE, Cause, IncidentState, RemediationState
from apps.diagnosis.models import Incident, Remediation
from apps.diagnosis.services import approve_remediation
from apps.remediation.signals import repair_returned, repair_validated

# The causes whose fix is a person's work on the node, by the gate that validated that work (remediation's GateKind
# values); the acceptance gate validates both.
REPAIRED_CAUSES = {
    "gpu": {Cause.GPU_LOST, Cause.GPU_THERMAL},
    "link": {Cause.LINK_DOWN},
    "acceptance": {Cause.GPU_LOST, Cause.GPU_THERMAL, Cause.LINK_DOWN},
}


def resolve_for_repair(*, repair, gate) -> list[Incident]:
    ids = {item["incident"] for event in repair.events.all() for item in event.evidence if item.get("incident")}
    if not ids:
        return []
    resolved = []
    with transaction.atomic():
        for incident in Incident.objects.select_for_update().filter(public_id__in=ids, state__in=INCIDENT_ACTIVE):
            incident.state, incident.resolved_at = IncidentState.RESOLVED, timezone.now()
            incident.resolution = (
                f"Repair of {repair.node.hostname} validated ({gate.get_kind_display().split(':')[0]} gate): "
                f"{gate.summary}"
            )
            incident.save(update_fields=["state", "resolved_at", "resolution", "updated"])  # audited
            resolved.append(incident)
    return resolved


def recheck_after_return(*, repair) -> list[Remediation]:
    """The node is back in service after its repair passed its gate: each incident about it that concluded on a
    cause that repair fixes and waits for that fix by hand has the fix approved on the repair's behalf (audited as
    automatic: the repair was the work) and its re-check started; the re-check resolves it, or leaves it unresolved
    saying what still fails. An incident whose fix is commands, or whose runbook is busy, is left to its operator."""
    causes = REPAIRED_CAUSES.get(repair.gate_kind, set())
    waiting = (
        Remediation.objects.filter(
            state=RemediationState.PROPOSED,
            commands=[],
            cause__in=causes,
            incident__state=IncidentState.CONCLUDED,
            incident__in=Incident.objects.touching(repair.node),
        )
        .select_related("incident")
        .order_by("created")
    )
    started = []
    for remediation in waiting:
        with transaction.atomic():
            approve_remediation(remediation=remediation, user=None, automatic=True)
            remediation.outcome = f"Repair of {repair.node.hostname} returned it to service; re-checking."
            remediation.save(update_fields=["outcome", "updated"])
        started.append(remediation)
    return started


def _on_validated(sender, repair, gate, **kwargs) -> None:
    resolve_for_repair(repair=repair, gate=gate)


def _on_returned(sender, repair, **kwargs) -> None:
    recheck_after_return(repair=repair)


def connect() -> None:
    repair_validated.connect(_on_validated, dispatch_uid="diagnosis-resolve-on-repair")
    repair_returned.connect(_on_returned, dispatch_uid="diagnosis-recheck-on-return")
