"""A repair's passed validation resolves the incidents whose faults it fixed: the active incidents named by the
evidence of the repair's health events (a runbook's finding records the incident on the event it makes). Listens to
remediation's `repair_validated` (docs/health.md, "Repair and return")."""

from django.db import transaction
from django.utils import timezone

from apps.diagnosis.choices import INCIDENT_ACTIVE, IncidentState
from apps.diagnosis.models import Incident
from apps.remediation.signals import repair_validated


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


def _on_validated(sender, repair, gate, **kwargs) -> None:
    resolve_for_repair(repair=repair, gate=gate)


def connect() -> None:
    repair_validated.connect(_on_validated, dispatch_uid="diagnosis-resolve-on-repair")
