"""The `training-progress` kind: the simulated job's log read on its node rank 0, its step lines stored as a series
that the simulator's loss model predicts, the schedule, and /metrics. The test sets the clock (`clock`) the log is
written at, so the step lines read are the ones it expects however long it takes."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from apps.inventory.models import Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec, create_job
from apps.monitoring import progress
from apps.simulator.training import LOSS_NOISE, expected_loss
from apps.workloads import services as workloads
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingJobNode, TrainingProgress

# The clock first: the cluster and the job are stamped at the test's moment.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clock", "on_the_simulator")]

HOSTS = ("gpu001", "gpu002")


@pytest.fixture
def training_job(demo_cluster):
    job = TrainingJob.objects.create(
        name="llm-pretrain",
        ranks_per_node=8,
        checkpoint_dir="/checkpoints/llm-pretrain",
        checkpoint_interval_steps=200,
        log_path="/var/log/train/llm-pretrain.log",
        state=TrainingState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=30),
    )
    for rank, hostname in enumerate(HOSTS):
        TrainingJobNode.objects.create(job=job, node=Node.objects.get(hostname=hostname), node_rank=rank)
    return job


def _read(training_job, run_shards) -> Job:
    (job,) = progress.schedule_reads()
    assert job.parameters == {
        "training_job": str(training_job.public_id),
        "log_path": training_job.log_path,
        "training_job_name": training_job.name,
    }
    return run_shards(job)


def test_a_read_stores_the_step_lines_of_the_simulated_log(training_job, run_shards, clock):
    job = _read(training_job, run_shards)
    assert job.status == JobStatus.SUCCEEDED
    assert job.steps.get().node.hostname == "gpu001"  # node rank 0 prints the iteration lines
    points = workloads.progress_series(job=training_job)
    # 30 minutes at 1.6 s a step after 45 s of start-up: step 1096, one line every 10
    assert len(points) == 109
    assert [p.step for p in points] == list(range(10, 10 * len(points) + 1, 10))
    first, last = points[0], points[-1]
    assert first.loss > last.loss > 2.0  # a decaying curve towards its floor
    # the simulator's model: a decaying curve with seeded noise, Megatron's warm-up of the learning rate
    for point in points:
        assert abs(point.loss - expected_loss(point.step)) <= LOSS_NOISE + 1e-6
        assert 512 / 1.6 / 1.03 < point.samples_per_second < 512 / 1.6 / 0.97
        assert point.learning_rate == pytest.approx(3e-4 * point.step / 2000, rel=1e-5)
    assert last.time == clock.START - timedelta(seconds=11)  # step 1090 ended at 45 + 1090 * 1.6 s, printed 09:29:49


def test_a_second_read_adds_nothing_twice_and_reads_wait_for_their_interval(training_job, run_shards, clock):
    _read(training_job, run_shards)
    count = TrainingProgress.objects.count()
    clock.advance(seconds=30)
    assert progress.schedule_reads() == []  # the last read is under a minute old
    clock.advance(seconds=90)
    _read(training_job, run_shards)
    # Two minutes on, 75 more steps (1096 to 1171): the lines of steps 1100 to 1170, none of the earlier ones again.
    assert TrainingProgress.objects.count() == count + 8


def test_a_job_without_a_log_is_refused_by_name(training_job):
    training_job.log_path = ""
    training_job.save()
    with pytest.raises(ValidationError) as refused:
        create_job(
            kind="training-progress",
            targets=TargetSpec(nodes=("gpu001",)),
            parameters={"training_job": str(training_job.public_id)},
        )
    assert "training_job" in str(refused.value.detail)
    assert progress.schedule_reads() == []


def test_a_read_runs_on_node_rank_0_only(training_job):
    with pytest.raises(ValidationError) as refused:
        create_job(
            kind="training-progress",
            targets=TargetSpec(nodes=("gpu002",)),
            parameters={"training_job": str(training_job.public_id)},
        )
    assert "gpu001" in str(refused.value.detail["targets"])
    assert not Job.objects.exists()


def test_the_shipped_demo_job_is_read_from_its_first_minute_and_shows_progress_and_loss(
    demo_cluster, run_shards, client, operator, clock
):
    """`make run` loads the demo workloads, then gives the demo a month of history: the main training job's log is
    on its node rank 0 and a read stores its progress (it failed every minute: the job had never started)."""
    from apps.monitoring.demo import load_slos
    from apps.simulator.training import STARTUP_SECONDS, TrainingRun
    from apps.workloads.demo import load_workloads

    load_workloads()
    load_slos()
    demo = TrainingJob.objects.get(name="llama-pretrain")
    (job,) = progress.schedule_reads()
    run_shards(job)
    assert job.status == JobStatus.SUCCEEDED, list(job.steps.values_list("summary", flat=True))
    points = workloads.progress_series(job=demo)
    assert len(points) > 100
    newest = points[-1]
    assert clock.now - timedelta(seconds=16) < newest.time <= clock.now  # one line every 10 steps of 1.6 s
    ran = (newest.time - demo.started_at).total_seconds() - STARTUP_SECONDS
    step_seconds = TrainingRun.__dataclass_fields__["step_seconds"].default
    assert abs(newest.step - ran / step_seconds) <= 20  # still training a month in, one line every 10 steps
    assert abs(newest.loss - expected_loss(newest.step)) <= LOSS_NOISE + 1e-6
    demo.refresh_from_db()
    assert demo.progress_error == ""
    client.force_login(operator)
    page = client.get(f"/workloads/training/{demo.public_id}/").content.decode()
    assert "No step lines read" not in page and "<dt>Started</dt><dd>—</dd>" not in page
    assert f"Step <strong>{newest.step}</strong>" in page


def test_a_read_that_keeps_failing_is_said_once_on_the_job_page_and_tried_less_and_less_often(
    training_job, run_shards, client, operator, api_as
):
    TrainingJob.objects.filter(pk=training_job.pk).update(started_at=None)  # the simulator runs no such job: no log
    failed = run_shards(progress.schedule_reads()[0])
    assert failed.status == JobStatus.FAILED
    training_job.refresh_from_db()
    assert f"gpu001: tail: cannot open '{training_job.log_path}'" in training_job.progress_error
    client.force_login(operator)
    page = client.get(f"/workloads/training/{training_job.public_id}/").content.decode()
    assert 'id="progress-error"' in page and "cannot open" in page
    body = api_as(operator).get(f"/api/training-jobs/{training_job.public_id}/").json()
    assert body["progress_error"] == training_job.progress_error and body["progress_error_at"]
    # The next read waits twice the interval after one failure, four times after two: not one failed job a minute.
    start = failed.created
    minute = timedelta(seconds=60)
    assert progress.schedule_reads(now=start + 1.5 * minute) == []
    second = run_shards(progress.schedule_reads(now=start + 2 * minute)[0])
    assert second.status == JobStatus.FAILED
    Job.objects.filter(pk=second.pk).update(created=start + 2 * minute)
    assert progress.schedule_reads(now=start + 5 * minute) == []
    assert len(progress.schedule_reads(now=start + 6 * minute)) == 1
    assert Job.objects.filter(kind="training-progress").count() == 3


def test_an_edited_job_is_read_again_at_once_and_a_good_read_clears_the_error(
    training_job, run_shards, client, operator
):
    started = training_job.started_at
    TrainingJob.objects.filter(pk=training_job.pk).update(started_at=None)
    failed = run_shards(progress.schedule_reads()[0])
    later = failed.created + timedelta(seconds=61)
    assert progress.schedule_reads(now=later) == []
    training_job.refresh_from_db()
    training_job.started_at = started
    training_job.save()  # an operator records when it started
    mended = run_shards(progress.schedule_reads(now=later)[0])
    assert mended.status == JobStatus.SUCCEEDED
    training_job.refresh_from_db()
    assert training_job.progress_error == "" and training_job.progress_error_at is None
    client.force_login(operator)
    assert 'id="progress-error"' not in client.get(f"/workloads/training/{training_job.public_id}/").content.decode()
