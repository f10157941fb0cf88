"""Starting one phase of a runbook as a job: which nodes it runs on and with which parameters.

The kind's job_finished calls this to start the next phase; services call it to start the first one. It names the
kind by its name (the incident's runbook: `nccl-timeout` or `training-interrupted`), so this module does not import
the kinds (docs/jobs.md: import direction).
"""

from django.conf import settings
from django.db import models

from apps.deployments.node_operations import scheduler_controller
from apps.diagnosis import storage_checks
from apps.diagnosis.choices import IncidentState
from apps.diagnosis.models import Incident, Remediation
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job

KIND = "nccl-timeout"
RECOVERY_KIND = "training-interrupted"
UTILISATION_KIND = "gpu-utilisation"
RUNBOOKS = (KIND, RECOVERY_KIND, UTILISATION_KIND)


class Phase(models.TextChoices):
    LOG = "log", "Read the training log"
    NETWORK = "network", "Check the suspect nodes"
    STORAGE = "storage", "Check storage and the data loader"
    CHECKS = "checks", "Check the checkpoint tier, the checkpoints and the nodes"
    SAMPLE = "sample", "Sample the GPUs' utilisation"
    SCHEDULER = "scheduler", "Read the scheduler's placement"
    FIX = "fix", "Apply the fix"
    VERIFY = "verify", "Re-check after the fix"


STATE_OF_PHASE = {
    Phase.LOG: IncidentState.INVESTIGATING,
    Phase.NETWORK: IncidentState.INVESTIGATING,
    Phase.STORAGE: IncidentState.INVESTIGATING,
    Phase.CHECKS: IncidentState.INVESTIGATING,
    Phase.SAMPLE: IncidentState.INVESTIGATING,
    Phase.SCHEDULER: IncidentState.INVESTIGATING,
    Phase.FIX: IncidentState.FIXING,
    Phase.VERIFY: IncidentState.VERIFYING,
}


def _hosts(incident: Incident, phase: str, remediation: Remediation | None) -> list[str]:
    job_hosts = (
        [member.node.hostname for member in incident.training_job.members.select_related("node")]
        if incident.training_job
        else []
    )
    suspects = list(incident.suspect_nodes.values_list("hostname", flat=True))
    if incident.runbook == RECOVERY_KIND:
        if phase == Phase.FIX:
            return sorted({command["hostname"] for command in remediation.commands})
        if phase == Phase.VERIFY and remediation is not None and remediation.plan.get("hosts"):
            return remediation.plan["hosts"][:1]  # the new node rank 0: its log shows the resume and the steps
        return job_hosts
    if incident.runbook == UTILISATION_KIND:
        if phase == Phase.FIX:
            return sorted({command["hostname"] for command in remediation.commands})
        if phase == Phase.SCHEDULER:  # the scheduler's controller lists every node's workloads
            controller = scheduler_controller()
            return [controller.hostname] if controller else suspects[:1]
        return job_hosts
    if phase == Phase.LOG:
        return job_hosts
    if phase in (Phase.NETWORK, Phase.STORAGE):
        return suspects or ([incident.node.hostname] if incident.node else [])
    if phase == Phase.FIX:
        return sorted({command["hostname"] for command in remediation.commands})
    return sorted(set(job_hosts) | set(suspects) or ({incident.node.hostname} if incident.node else set()))


def _sampling_window(incident: Incident) -> int | None:
    first = incident.jobs.filter(parameters__phase=Phase.SAMPLE).order_by("created").first()
    return first.parameters.get("sample_seconds") if first else None


def start_phase(
    *,
    incident: Incident,
    phase: str,
    remediation: Remediation | None = None,
    user=None,
    transport: str | None = None,
    wait_seconds: int | None = None,
    route: bool = False,
    sample_seconds: int | None = None,
) -> Job:
    """Create the phase's job (enqueued on commit) and move the incident to the phase's state. `route`: the log
    phase of runbook 3 hands the incident to runbook 1 when the log shows only collective timeouts."""
    parameters = {"incident": str(incident.public_id), "phase": phase}
    if route:
        parameters["route"] = True
    if incident.training_job and incident.training_job.log_path and phase in (Phase.LOG, Phase.VERIFY):
        parameters["log_path"] = incident.training_job.log_path
    if incident.training_job and phase == Phase.STORAGE:
        parameters["checkpoint_dir"] = incident.training_job.checkpoint_dir
    if remediation is not None:
        parameters["remediation"] = str(remediation.public_id)
    if incident.runbook == UTILISATION_KIND and phase in (Phase.SAMPLE, Phase.VERIFY):
        sample_seconds = sample_seconds or _sampling_window(incident)  # the re-check samples as long as the first
        if sample_seconds:
            parameters["sample_seconds"] = sample_seconds
    storage_cause = remediation is not None and remediation.cause in storage_checks.CAUSES
    if phase == Phase.VERIFY and incident.runbook == KIND and storage_cause:
        parameters["branch"] = "storage"  # re-check what concluded the cause
        if incident.training_job:
            parameters["checkpoint_dir"] = incident.training_job.checkpoint_dir
    if phase == Phase.VERIFY:
        parameters["wait_seconds"] = (
            settings.RACKPILOT_DIAGNOSIS_VERIFY_WAIT_SECONDS if wait_seconds is None else wait_seconds
        )
    job = create_job(
        kind=incident.runbook if incident.runbook in RUNBOOKS else KIND,
        targets=TargetSpec(nodes=tuple(_hosts(incident, phase, remediation))),
        parameters=parameters,
        transport=transport or incident.transport or None,
        requested_by=user,
    )
    incident.jobs.add(job)
    if remediation is not None and phase in (Phase.FIX, Phase.VERIFY):
        setattr(remediation, "fix_job" if phase == Phase.FIX else "verify_job", job)
        remediation.save(update_fields=["fix_job", "verify_job", "updated"])
    incident.state = STATE_OF_PHASE[phase]
    incident.save(update_fields=["state", "updated"])
    return job
