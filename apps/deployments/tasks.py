"""Thin Celery tasks of deployments: the work is in apps.deployments.recording and apps.deployments.cluster."""

from celery import shared_task
from django.conf import settings

from apps.deployments import cluster, recording
from apps.deployments.models import Deployment


@shared_task(name="rackpilot.deployments.settle", ignore_result=True, time_limit=120)
def settle() -> int:
    """Beat's safety net: cluster-acceptance checks a lost worker left running (re-queued or failed), and a deployment
    whose run's job is over but whose state did not follow (job_finished failed)."""
    return cluster.reap_lost_checks() + recording.settle_finished_runs()


@shared_task(
    name=cluster.TASK,
    ignore_result=True,
    soft_time_limit=settings.RACKPILOT_JOB_TIME_LIMIT - 60,
    time_limit=settings.RACKPILOT_JOB_TIME_LIMIT,
)
def cluster_acceptance(deployment_public_id: str) -> str:
    """Phase 5 of a deployment: its benchmarks one after the other in this worker, then the deployment's state.
    Not acks_late: each check claims its row, so a redelivered message runs nothing twice."""
    deployment = Deployment.objects.filter(public_id=deployment_public_id).first()
    if deployment is None:
        return "gone"
    cluster.execute(deployment)
    return recording.settle_state(deployment).state
