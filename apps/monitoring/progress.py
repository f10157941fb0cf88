"""The schedule of training-progress reads: beat starts a `training-progress` job (the kind:
apps/monitoring/kinds/training_progress.py) per active training job every RACKPILOT_TRAINING_PROGRESS_SECONDS."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone
from rest_framework import serializers

from apps.jobs.choices import JOB_ACTIVE
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.workloads.models import TrainingJob

logger = logging.getLogger(__name__)
KIND = "training-progress"


def schedule_reads(*, now: datetime | None = None) -> list[Job]:
    """Start a `training-progress` job for every active training job with a log and nodes whose last read started
    RACKPILOT_TRAINING_PROGRESS_SECONDS ago or more, unless one is still queued or running (reads never pile up)."""
    now = now or timezone.now()
    interval = timedelta(seconds=settings.RACKPILOT_TRAINING_PROGRESS_SECONDS)
    started = []
    reads = Job.objects.filter(kind=KIND)
    for training_job in TrainingJob.objects.active().exclude(log_path="").order_by("name"):
        first = training_job.members.select_related("node").order_by("node_rank").first()
        if first is None:
            continue
        mine = reads.filter(parameters__training_job=str(training_job.public_id))
        if mine.filter(status__in=JOB_ACTIVE).exists():
            continue
        last = mine.aggregate(last=Max("created"))["last"]
        if last is not None and now - last < interval:
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
            logger.warning("training progress of %s not read: %s", training_job.name, error.detail)
    return started
