"""Incidents open by themselves when a training job fails: its state changes to failed or interrupted (whoever
reports it: the scheduler integration over the API, an operator, the admin). The incident's runbook is chosen from
the triage of the job's log, read by runbook 3's first phase: only NCCL watchdog timeouts hand it to runbook 1.

The workloads app may not import diagnosis (a layer below), so this module listens to its model's saves.
"""

import logging

from django.db import transaction
from django.db.models.signals import post_save, pre_save

from apps.diagnosis.choices import INCIDENT_ACTIVE
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob

FAILING = (TrainingState.FAILED, TrainingState.INTERRUPTED)
logger = logging.getLogger(__name__)


def _remember_state(sender, instance: TrainingJob, raw=False, **kwargs) -> None:
    if raw or instance.pk is None:
        instance._state_before = None
        return
    instance._state_before = TrainingJob.objects.filter(pk=instance.pk).values_list("state", flat=True).first()


def _open_on_failure(sender, instance: TrainingJob, created: bool, raw=False, **kwargs) -> None:
    before = getattr(instance, "_state_before", None)
    if raw or instance.state not in FAILING or before in FAILING:
        return
    if not instance.log_path or not instance.members.exists():
        return
    if instance.incidents.filter(state__in=INCIDENT_ACTIVE).exists():
        return  # already being worked on (a recovery in flight, or an operator's incident)
    transaction.on_commit(lambda: _open_safely(instance.pk))


def _open_safely(job_id: int) -> None:
    """The state change is what the caller asked for: an incident that cannot open is logged, never their error."""
    try:
        open_for_failure(job_id=job_id)
    except Exception:  # noqa: BLE001  (a kind refusing its targets, a transport not allowed here)
        logger.exception("could not open the incident of failed training job %s", job_id)


def open_for_failure(*, job_id: int):
    """Open the incident of a failed training job and start runbook 3's log phase (which may hand over)."""
    from apps.diagnosis import services

    job = TrainingJob.objects.filter(pk=job_id).first()
    if job is None or job.state not in FAILING or job.incidents.filter(state__in=INCIDENT_ACTIVE).exists():
        return None
    incident = services.open_incident(
        user=None,
        training_job=job,
        runbook="training-interrupted",
        title=f"Training {job.get_state_display().lower()}: {job.name}",
    )
    services.start_runbook(incident=incident, user=None, route=True)
    return incident


def connect() -> None:
    pre_save.connect(_remember_state, sender=TrainingJob, dispatch_uid="diagnosis-training-state-before")
    post_save.connect(_open_on_failure, sender=TrainingJob, dispatch_uid="diagnosis-training-failed")
