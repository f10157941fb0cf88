"""The runbooks' read of a training log fits in what a job keeps of a command's output (its first
RACKPILOT_ARTIFACT_MAX_BYTES): a longer read lost its newest lines, so the re-check after the demo's checkpoint resume
never saw the resume and called the incident unresolved."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.diagnosis.runbook import LOG_LINES, log_read
from apps.inventory.models import Node
from apps.simulator import services
from apps.workloads.demo import load_workloads
from apps.workloads.models import TrainingJob


def test_the_log_read_of_a_month_long_run_fits_in_a_jobs_output(demo_cluster):
    load_workloads()
    job = TrainingJob.objects.get(name="llama-pretrain")
    TrainingJob.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(days=30))  # as the demo's

    out = services.run_command(node=Node.objects.get(hostname="gpu005"), argv=log_read(job.log_path).argv()).stdout

    assert out.count("\n") == LOG_LINES
    assert len(out.encode()) < settings.RACKPILOT_ARTIFACT_MAX_BYTES
