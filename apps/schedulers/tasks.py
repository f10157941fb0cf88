"""Thin Celery tasks of the schedulers app: the work is in apps.schedulers.services."""

from celery import shared_task

from apps.schedulers import services


@shared_task(name="rackpilot.schedulers.readback", ignore_result=True, time_limit=120)
def readback() -> str:
    """Beat's periodic read of the scheduler's node states (RACKPILOT_SCHEDULER_KIND: Slurm or Kubernetes): starts a
    scheduler-readback job on the controller, unless there is no controller or the last readback is still running."""
    return services.start_periodic_readback()
