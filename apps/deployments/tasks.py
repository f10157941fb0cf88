"""Thin Celery tasks of deployments: the work is in apps.deployments.recording."""

from celery import shared_task

from apps.deployments import recording


@shared_task(name="rackpilot.deployments.settle", ignore_result=True, time_limit=120)
def settle() -> int:
    """Beat's safety net: a deployment whose run's job is over but whose state did not follow (job_finished failed)."""
    return recording.settle_finished_runs()
