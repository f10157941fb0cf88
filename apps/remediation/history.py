"""A node's history, end to end and in time order: its health events opened and cleared, remediation's decisions,
drains and returns, its repairs with their evidence, parts and validations (the node page's History section)."""

from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse
from django.utils.dateparse import parse_datetime

from apps.core.models import AuditEntry
from apps.core.text import counted
from apps.health.models import HealthEvent
from apps.inventory.models import Node
from apps.remediation.models import PartReplacement, RemediationDecision, Repair, RepairGate

SHOWN = 100  # the newest entries the section shows


@dataclass(frozen=True)
class HistoryEntry:
    at: datetime
    what: str  # event, cleared, decision, drain, undrain, repair, evidence, part, gate, resume
    text: str
    url: str = ""


def node_history(node: Node, *, limit: int = SHOWN) -> list[HistoryEntry]:
    """Every step of the node's health loop, oldest first (the newest `limit` of them)."""
    entries: list[HistoryEntry] = []
    for event in HealthEvent.objects.filter(node=node).order_by("first_seen", "pk")[:500]:
        entries.append(
            HistoryEntry(event.first_seen, "event", f"{event.get_severity_display()} {event.kind}: {event.summary}")
        )
        if event.cleared_at:
            entries.append(
                HistoryEntry(
                    event.cleared_at,
                    "cleared",
                    f"{event.kind} cleared by {event.get_cleared_by_display().lower()}: {event.clear_reason}",
                )
            )
    for decision in RemediationDecision.objects.filter(node=node).select_related("policy")[:500]:
        entries.append(
            HistoryEntry(
                decision.decided_at,
                "decision",
                f"{decision.policy.name}: {decision.get_outcome_display()}: {decision.reason}",
            )  # fmt: skip
        )
    for entry in AuditEntry.objects.for_object(node).order_by("created")[:500]:
        change = entry.changes.get("drained_at")
        if not change:
            continue
        who = entry.actor_name or entry.get_source_display().lower()
        if change[1]:
            reason = (entry.changes.get("drain_reason") or [None, ""])[1]
            since = parse_datetime(str(change[1])) or entry.created  # the drain's own start (a quarantine's decision)
            entries.append(HistoryEntry(since, "drain", f"Drained by {who}: {reason}"))
        else:
            entries.append(HistoryEntry(entry.created, "undrain", f"Back in service (undrained by {who})"))
    for repair in Repair.objects.filter(node=node).order_by("opened_at", "pk"):
        url = reverse("repair-detail", args=[repair.public_id])
        entries.append(HistoryEntry(repair.opened_at, "repair", f"Repair opened: {repair.reason}", url))
        if repair.evidence_captured_at:
            bug = repair.evidence.get("bug_report", {})
            kernel = repair.evidence.get("kernel_log", {})
            text = f"Evidence captured: {counted(kernel.get('matched', 0), 'kernel log line')}, " + (
                "bug report on the node" if bug.get("file") else "no bug report"
            )
            entries.append(HistoryEntry(repair.evidence_captured_at, "evidence", text, url))
        if repair.closed_at:
            if repair.resume_job_id:
                entries.append(
                    HistoryEntry(
                        repair.closed_at,
                        "resume",
                        f"Resumed through the scheduler (job {repair.resume_job_id})",
                        reverse("job-page", args=[repair.resume_job_id]),
                    )  # fmt: skip
                )
            else:
                entries.append(HistoryEntry(repair.closed_at, "repair", "Repair closed without a return", url))
    for part in PartReplacement.objects.filter(node=node).select_related("repair"):
        entries.append(
            HistoryEntry(
                part.replaced_at,
                "part",
                f"{part.component_label} replaced: {part.old_serial or '?'} → {part.new_serial}",
                reverse("repair-detail", args=[part.repair.public_id]),
            )  # fmt: skip
        )
    for gate in RepairGate.objects.filter(repair__node=node).select_related("repair"):
        url = reverse("repair-detail", args=[gate.repair.public_id])
        label = gate.get_kind_display().split(":")[0]
        entries.append(HistoryEntry(gate.started_at, "gate", f"{label} validation started", url))
        if gate.finished_at:
            entries.append(
                HistoryEntry(gate.finished_at, "gate", f"{label} validation {gate.state}: {gate.summary}", url)
            )
    entries.sort(key=lambda entry: entry.at)
    return entries[-limit:]


def section(node: Node, request=None) -> dict:
    return {"node": node, "history": node_history(node)}
