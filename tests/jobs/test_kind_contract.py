"""docs/jobs.md is the job-kind contract: its complete example kind, taken from the page as written, registers and
runs over the simulator, and each of its hooks leaves what the page says it does."""

import re
from pathlib import Path

import pytest
from rest_framework.exceptions import ValidationError

from apps.jobs import services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.kinds import KINDS
from apps.jobs.models import JobEvent, JobStep

pytestmark = pytest.mark.django_db(transaction=True)
DOC = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"


@pytest.fixture
def gpu_count_kind():
    section = DOC.read_text().split("### A complete kind", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(source, f"{DOC}:gpu-count", "exec"), {"__name__": "docs_gpu_count"})  # noqa: S102  (our own page)
    yield KINDS["gpu-count"]
    KINDS.pop("gpu-count")


def _run(run_shards, expected: int):
    job = services.create_job(
        kind="gpu-count",
        targets=services.TargetSpec(nodes=("gpu017", "gpu018")),
        parameters={"expected": expected},
        transport="sim",
    )
    return run_shards(job)


def test_the_documented_example_kind_runs_as_documented(gpu_count_kind, demo_cluster, run_shards, settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    with pytest.raises(ValidationError) as refused:
        _run(run_shards, 0)
    assert "expected" in refused.value.detail["parameters"]

    enough = _run(run_shards, 8)  # the demo's H200 nodes have eight GPUs each
    assert enough.status == JobStatus.SUCCEEDED
    assert set(JobStep.objects.filter(job=enough).values_list("status", "summary")) == {
        (StepStatus.SUCCEEDED, "8 of 8 GPUs")
    }
    finished = JobEvent.objects.get(job=enough, hostname="gpu017", step="gpus", message__startswith="gpus: ")
    assert (finished.data["gpus"], finished.data["expected"]) == (8, 8)  # cell_record's data, pushed with it
    assert JobEvent.objects.filter(job=enough, message="shard 0: 0 nodes short of GPUs").exists()
    assert JobEvent.objects.filter(job=enough, message="gpu-count: 0 of 2 nodes short").exists()

    short = _run(run_shards, 9)
    assert short.status == JobStatus.FAILED  # the kind's statuses decide the job's, not the exit codes
    assert set(JobStep.objects.filter(job=short).values_list("status", "summary")) == {
        (StepStatus.FAILED, "8 of 9 GPUs")
    }
    shard = JobEvent.objects.get(job=short, message="shard 0: 2 nodes short of GPUs")
    assert shard.level == "warning" and shard.data["short"] == ["gpu017", "gpu018"]
    # job_finished ran once, after the final status, on a fresh instance that read the database.
    assert JobEvent.objects.filter(job=short, message="gpu-count: 2 of 2 nodes short").count() == 1
