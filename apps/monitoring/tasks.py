"""Thin Celery tasks of monitoring (the system queue): the work is in apps.monitoring.services."""

from celery import shared_task

from apps.monitoring import services


@shared_task(name="rackpilot.monitoring.poll_bmcs", ignore_result=True, time_limit=120)
def poll_bmcs() -> int:
    """Beat: start the BMC reads of every site that is due."""
    return len(services.schedule_polls())


@shared_task(name="rackpilot.monitoring.prune_bmc_readings", ignore_result=True, time_limit=1800)
def prune_bmc_readings() -> int:
    return services.prune_readings()
