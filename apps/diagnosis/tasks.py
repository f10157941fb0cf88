"""Thin Celery task of the diagnosis app: the work is in apps.diagnosis.training_watch."""

from celery import shared_task
from django.utils import timezone

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.diagnosis import training_watch


@shared_task(name="rackpilot.diagnosis.watch_training", ignore_result=True, time_limit=120)
def watch_training() -> int:
    """Beat's periodic look at running training jobs' progress: hangs and slowdowns open incidents."""
    with audit_context(source=ChangeSource.SYSTEM):
        return len(training_watch.watch_training(now=timezone.now()))
