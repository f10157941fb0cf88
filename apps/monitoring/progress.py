"""The schedule of training-progress reads: beat starts a `training-progress` job (the kind:
apps/monitoring/kinds/training_progress.py) per active training job every RACKPILOT_TRAINING_PROGRESS_SECONDS.

A read that fails fails again the next minute for the same reason (no such log, a node that does not answer), and a
failed job is seen everywhere (the jobs list, the audit log, /metrics, `job.failed` webhooks): after each failure in a
row the next read waits twice as long, up to MAX_BACKOFF, and the training job's page says why the reads fail. Editing
the training job (a new log path, new nodes) reads it again at once."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apps.jobs.choices import JOB_ACTIVE, JobStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.workloads import services as workloads
from apps.workloads.models import TrainingJob

logger = logging.getLogger(__name__)
KIND = "training-progress"
MAX_BACKOFF = timedelta(days=1)
FAILED = (JobStatus.FAILED, JobStatus.ERROR)


def next_read_at(training_job: TrainingJob, reads) -> datetime | None:
    """When the job's log is due to be read again (None: never read, due now): the interval after the last read,
    doubled for each read in a row that failed (at most MAX_BACKOFF), unless the job was edited since."""
    interval = timedelta(seconds=settings.RACKPILOT_TRAINING_PROGRESS_SECONDS)
    recent = list(reads.order_by("-created").values_list("status", "created")[:20])
    if not recent:
        return None
    last = recent[0][1]
    failures = next((count for count, (status, _) in enumerate(recent) if status not in FAILED), len(recent))
    if failures and training_job.updated > last:
        return last + interval  # edited since the failure: what failed may be mended
    return last + min(interval * 2**failures, max(MAX_BACKOFF, interval))


def schedule_reads(*, now: datetime | None = None) -> list[Job]:
    """Start a `training-progress` job for every active training job with a log and nodes that is due a read
    (next_read_at), unless one is still queued or running (reads never pile up)."""
    now = now or timezone.now()
    started = []
    reads = Job.objects.filter(kind=KIND)
    for training_job in TrainingJob.objects.active().exclude(log_path="").order_by("name"):
        first = training_job.members.select_related("node").order_by("node_rank").first()
        if first is None:
            continue
        mine = reads.filter(parameters__training_job=str(training_job.public_id))
        if mine.filter(status__in=JOB_ACTIVE).exists():
            continue
        due = next_read_at(training_job, mine)
        if due is not None and now < due:
            continue
        try:
            started.append(
                create_job(
                    kind=KIND,
                    targets=TargetSpec(nodes=(str(first.node.public_id),)),
                    parameters={"training_job": str(training_job.public_id)},
                )
            )
        except serializers.ValidationError as error:  # a log outside the allowed directories: not read
            refusal = "; ".join(_messages(error.detail))
            if workloads.note_progress_read(job=training_job, error=f"not read: {refusal}"):
                logger.warning("training progress of %s not read: %s", training_job.name, refusal)
    return started


def _messages(detail) -> list[str]:
    if isinstance(detail, dict):
        return [message for value in detail.values() for message in _messages(value)]
    if isinstance(detail, list):
        return [message for value in detail for message in _messages(value)]
    return [str(detail)]
