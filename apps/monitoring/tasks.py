"""Thin Celery tasks of monitoring (the system queue): the work is in apps.monitoring.bmcs."""

from celery import shared_task

from apps.monitoring import bmcs, progress


@shared_task(name="rackpilot.monitoring.poll_bmcs", ignore_result=True, time_limit=120)
def poll_bmcs() -> int:
    """Beat: start the BMC reads of every site that is due."""
    return len(bmcs.schedule_polls())


@shared_task(name="rackpilot.monitoring.prune_bmc_readings", ignore_result=True, time_limit=1800)
def prune_bmc_readings() -> int:
    return bmcs.prune_readings()


@shared_task(name="rackpilot.monitoring.read_training_progress", ignore_result=True, time_limit=120)
def read_training_progress() -> int:
    """Beat: start the log reads of every active training job that is due."""
    return len(progress.schedule_reads())
