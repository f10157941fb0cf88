"""Thin Celery tasks: explicit names, ids as arguments, time limits. The work is in executor and services.

run_shard is acks_late: a redelivered message (worker lost, or the Redis visibility timeout passed) finds its shard
no longer QUEUED and does nothing, so a long job is never silently run twice (docs/jobs.md).
"""

import os

from celery import shared_task
from django.conf import settings

from apps.jobs import executor, imports, services


@shared_task(
    name="rackpilot.jobs.run_shard",
    bind=True,
    acks_late=True,
    soft_time_limit=settings.RACKPILOT_JOB_TIME_LIMIT - 60,
    time_limit=settings.RACKPILOT_JOB_TIME_LIMIT,
    ignore_result=True,
)
def run_shard(self, job_public_id: str, shard_index: int) -> str:
    worker = f"{self.request.hostname}:{os.getpid()}" if self.request.hostname else None
    return executor.run_shard(job_public_id=job_public_id, index=shard_index, worker=worker)


@shared_task(
    name="rackpilot.jobs.import_inventory",
    soft_time_limit=settings.RACKPILOT_JOB_TIME_LIMIT - 60,
    time_limit=settings.RACKPILOT_JOB_TIME_LIMIT,
    ignore_result=True,
)
def import_inventory(job_public_id: str) -> str:
    # Not acks_late: a redelivered message would find the job claimed anyway; a lost worker's job is reaped.
    return imports.run_inventory_import(job_public_id=job_public_id)


@shared_task(name="rackpilot.jobs.reap", ignore_result=True, time_limit=120)
def reap() -> int:
    return services.reap_stale_jobs()


@shared_task(name="rackpilot.jobs.prune", ignore_result=True, time_limit=3600)
def prune() -> tuple[int, int]:
    return services.prune_old_output()
