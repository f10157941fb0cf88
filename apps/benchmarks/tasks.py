"""Thin Celery task: a benchmark run's rounds, each a job of the `nccl-tests` kind run in this worker.

Not acks_late: a redelivered message finds the run no longer queued (the conditional claim in execute_run) and does
nothing; commands on nodes are not assumed idempotent, so a run of a lost worker is not re-run.
"""

from celery import shared_task
from django.conf import settings

from apps.benchmarks import services
from apps.benchmarks.models import BenchmarkRun


@shared_task(
    name="rackpilot.benchmarks.run",
    soft_time_limit=settings.RACKPILOT_JOB_TIME_LIMIT - 60,
    time_limit=settings.RACKPILOT_JOB_TIME_LIMIT,
    ignore_result=True,
)
def run_benchmark(run_public_id: str) -> str:
    run = BenchmarkRun.objects.filter(public_id=run_public_id).first()
    if run is None:
        return "gone"
    return services.execute_run(run=run).status


@shared_task(
    name="rackpilot.benchmarks.analyse_timeline",
    soft_time_limit=settings.RACKPILOT_JOB_TIME_LIMIT - 60,
    time_limit=settings.RACKPILOT_JOB_TIME_LIMIT,
    ignore_result=True,
)
def analyse_timeline(job_public_id: str) -> str:
    """A large timeline upload's analysis (apps.benchmarks.timeline_jobs); a redelivery finds it claimed."""
    from apps.benchmarks.timeline_jobs import run_analysis

    return run_analysis(job_public_id=job_public_id)
