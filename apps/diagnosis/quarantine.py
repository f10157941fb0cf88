"""The resume half of checkpoint-aware quarantine (docs/health.md): once remediation has drained a node under a
running training job at the job's checkpoint, runbook 3 checks the newest checkpoints (shards, marker, manifest,
load), plans the resume from the newest valid one with the drained node replaced by a spare of its SKU (else left
out), and runs it for the job's launcher, approved by the remediation policy that quarantined the node.

Remediation is a layer below diagnosis: it calls this through the hook it defines (apps/remediation/checkpoint.py)."""

from apps.diagnosis import services
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import RECOVERY_KIND, Phase, start_phase
from apps.remediation.checkpoint import register_resumer
from apps.remediation.models import RemediationDecision


def resume_around(*, decision: RemediationDecision, transport=None, queue=True) -> str:
    """Opens a runbook 3 incident about the job and the drained node and starts its checks; returns a note for the
    decision's reason (the decision is saved by the caller)."""
    job, node = decision.training_job, decision.node
    resuming = RemediationDecision.objects.filter(training_job=job, resume_incident__isnull=False)
    checking = (
        Incident.objects.active()
        .filter(public_id__in=resuming.values("resume_incident"), remediations__isnull=True)
        .order_by("created")
        .first()
    )
    if checking is not None:  # another node of the job drained a moment ago: one resume leaves both out
        checking.suspect_nodes.add(node)
        decision.resume_incident = checking.public_id
        return f"resuming {job.name} around it in the resume already under way: incident {checking.public_id}"
    try:
        incident = services.open_incident(
            user=None,
            training_job=job,
            node=node,
            title=f"Checkpoint-aware quarantine: resume {job.name} around {node.hostname}",
            symptom=decision.reason,
            transport=transport or "",
            runbook=RECOVERY_KIND,
        )
    except services.IncidentError as error:
        return f"not resumed: {error}"
    incident.suspect_nodes.add(node)
    decision.resume_incident = incident.public_id
    start_phase(incident=incident, phase=Phase.CHECKS, transport=transport)
    return f"resuming {job.name} around it: incident {incident.public_id}"


def quarantines_resumed_by(incident) -> list[RemediationDecision]:
    """The drains whose job this incident resumes (their nodes are left out of the resume)."""
    return list(RemediationDecision.objects.filter(resume_incident=incident.public_id).select_related("node"))


def note_resume(*, incident, resume_step: int | None) -> None:
    """The checkpoint the resume runs from, and the steps since it that the drain lost, on each decision."""
    for decision in quarantines_resumed_by(incident):
        decision.checkpoint_step = resume_step
        lost = None
        if resume_step is not None and decision.drained_step is not None and decision.drained_step >= resume_step:
            lost = decision.drained_step - resume_step
        decision.steps_lost = lost
        decision.save(update_fields=["checkpoint_step", "steps_lost", "updated"])


def install() -> None:
    register_resumer(resume_around)
