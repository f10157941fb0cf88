"""Worker loss in-process: the defaults see a lost worker within 30 s; a rerunnable kind's shard is re-queued (bounded)
with its cells reset; any other ends "worker lost"; system tasks have a queue of their own; beat's reaper thread.

Real worker processes: test_celery_integration.py and test_scaleout.py."""

import threading
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from apps.jobs import services
from apps.jobs.choices import JobStatus, ShardStatus, StepStatus
from apps.jobs.kinds import KINDS, Sleep
from apps.jobs.models import Artifact, Job, JobEvent, JobShard, JobStep, compress
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def nodes(db):
    return [factories.make_node(hostname=f"loss{i}") for i in range(2)]


def _running_job(nodes, kind="sleep"):
    job = services.create_job(
        kind=kind,
        targets=services.TargetSpec(nodes=tuple(n.hostname for n in nodes)),
        parameters={"seconds": 100} if kind == "sleep" else {"commands": ["uname"]},
        transport="local",
    )
    shard = services.claim_shard(job=job, index=0, worker="gone-host:1")
    return job, shard


def _lose(shard, seconds=None):
    seconds = seconds if seconds is not None else django_settings.RACKPILOT_JOB_STALE_SECONDS + 1
    JobShard.objects.filter(pk=shard.pk).update(heartbeat=timezone.now() - timedelta(seconds=seconds))


def _reruns(sent):
    return [item for item in sent if isinstance(item, tuple)]  # (job, shard) from enqueue_rerun; jobs from enqueue


def test_the_defaults_see_a_killed_worker_within_30_seconds():
    # Seen as lost when its heartbeat is STALE old, at the next reaper pass at the latest: STALE + REAPER.
    assert django_settings.RACKPILOT_JOB_STALE_SECONDS + django_settings.RACKPILOT_JOB_REAPER_SECONDS <= 30
    # A running shard beats every cancel poll: many beats fit in the stale window, so a slow database is not a loss.
    assert django_settings.RACKPILOT_JOB_STALE_SECONDS >= 10 * django_settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS
    assert django_settings.CELERY_BEAT_SCHEDULE["rackpilot-jobs-reap"]["schedule"] == float(
        django_settings.RACKPILOT_JOB_REAPER_SECONDS
    )


def test_system_tasks_and_shards_go_to_their_own_queues():
    from portal.celery import app

    def queue(name):
        return app.amqp.router.route({}, name)["queue"].name

    assert queue("rackpilot.jobs.run_shard") == "jobs"
    for name in ("rackpilot.jobs.reap", "rackpilot.jobs.prune", "rackpilot.deployments.settle"):
        assert queue(name) == "system", name
    assert {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()} <= set(
        django_settings.SYSTEM_TASKS
    )
    assert queue("rackpilot.someone.new") == "jobs"  # unrouted tasks never crowd the system worker
    assert set(app.amqp.queues) == {"jobs", "system"}  # a worker without -Q consumes both


def test_a_rerunnable_shard_of_a_lost_worker_is_requeued_with_its_cells_reset(nodes, no_celery):
    assert Sleep.rerun_on_worker_loss and KINDS["shell-check"].rerun_on_worker_loss
    job, shard = _running_job(nodes)
    done = JobStep.objects.get(job=job, hostname="loss0")
    JobStep.objects.filter(pk=done.pk).update(status=StepStatus.SUCCEEDED, exit_code=0, summary="slept")
    Artifact.objects.create(
        step=done, stream="stdout", content=compress(b"x"), size_bytes=1, stored_bytes=1, cap_bytes=9
    )
    JobStep.objects.filter(job=job, hostname="loss1").update(status=StepStatus.RUNNING)
    assert services.reap_stale_jobs() == 0  # fresh heartbeat
    _lose(shard)

    assert services.reap_stale_jobs() == 1

    shard.refresh_from_db()
    assert (shard.status, shard.attempts, shard.worker, shard.heartbeat) == (ShardStatus.QUEUED, 1, "", None)
    assert set(JobStep.objects.filter(job=job).values_list("status", "exit_code", "summary")) == {
        (StepStatus.PENDING, None, "")
    }
    assert not Artifact.objects.filter(step__job=job).exists()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    event = JobEvent.objects.get(job=job, data__requeued=True)
    assert event.message.startswith("worker lost: gone-host:1 stopped sending heartbeats")
    assert "shard 0 re-queued (re-run 1 of 2)" in event.message
    assert _reruns(no_celery) == [(job.public_id, 0)]  # sent again, to whichever live worker takes it
    # The re-queued message is claimed like any other: once.
    assert services.claim_shard(job=job, index=0, worker="live:2").attempts == 2
    assert services.claim_shard(job=job, index=0, worker="live:3") is None


def test_re_runs_are_bounded_then_the_shard_ends_worker_lost(nodes, no_celery, settings):
    settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS = 2
    job, shard = _running_job(nodes)
    for attempt in (1, 2):
        _lose(shard)
        assert services.reap_stale_jobs() == 1
        assert JobShard.objects.get(pk=shard.pk).status == ShardStatus.QUEUED
        shard = services.claim_shard(job=job, index=0, worker=f"again:{attempt}")
        assert shard.attempts == attempt + 1
    _lose(shard)

    assert services.reap_stale_jobs() == 1

    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    assert JobShard.objects.get(pk=shard.pk).status == ShardStatus.ERROR
    assert JobEvent.objects.filter(job=job, data__requeued=True).count() == 2
    assert JobEvent.objects.filter(job=job, level="error", message__startswith="worker lost: again:2").exists()
    assert len(_reruns(no_celery)) == 2


def test_a_kind_that_may_not_run_twice_ends_worker_lost(nodes, no_celery, monkeypatch):
    monkeypatch.setattr(Sleep, "rerun_on_worker_loss", False)
    assert not KINDS["deploy"].rerun_on_worker_loss  # changes nodes: never re-run by the engine
    job, shard = _running_job(nodes)
    _lose(shard)

    assert services.reap_stale_jobs() == 1

    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    assert _reruns(no_celery) == []


def test_a_canceled_job_is_not_requeued(nodes, no_celery):
    job, shard = _running_job(nodes)
    services.cancel_job(job=job)
    _lose(shard)

    assert services.reap_stale_jobs() == 1

    assert Job.objects.get(pk=job.pk).status == JobStatus.ERROR
    assert _reruns(no_celery) == []


def test_a_requeued_shard_no_worker_takes_ends_worker_lost(nodes, no_celery, settings):
    settings.RACKPILOT_JOB_REQUEUE_WAIT_SECONDS = 60
    job, shard = _running_job(nodes)
    _lose(shard)
    assert services.reap_stale_jobs() == 1
    assert services.reap_stale_jobs(now=timezone.now() + timedelta(seconds=30)) == 0  # still waiting

    assert services.reap_stale_jobs(now=timezone.now() + timedelta(seconds=61)) == 1

    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    assert set(JobStep.objects.filter(job=job).values_list("status", flat=True)) == {StepStatus.SKIPPED}
    assert JobEvent.objects.filter(
        job=job, message__startswith="worker lost: no worker took re-queued shard 0"
    ).exists()


@pytest.mark.wirings  # the reaper's thread writes beside the test's connection
def test_beats_reaper_thread_reaps_without_any_worker(nodes, no_celery, settings):
    from portal.celery import reap_forever

    settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS = 0
    job, shard = _running_job(nodes)
    _lose(shard)
    stop = threading.Event()
    thread = threading.Thread(target=reap_forever, args=(0.1,), kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        deadline = timezone.now() + timedelta(seconds=60)  # the reaper acts at once; a loaded machine may take a while
        while Job.objects.get(pk=job.pk).is_active and timezone.now() < deadline:
            stop.wait(0.1)
    finally:
        stop.set()
        thread.join(5)
    assert Job.objects.get(pk=job.pk).status == JobStatus.ERROR


@pytest.mark.django_db
def test_a_periodic_call_that_fails_holds_back_none_after_it():
    """The embedded loop runs the periodic table in order: one that raises is logged and the rest still run."""
    from portal.celery import reap_forever

    stop, ran = threading.Event(), []

    def broken():
        raise RuntimeError("the scheduler is not there")

    def watch():
        ran.append("watch")
        stop.set()

    thread = threading.Thread(
        target=reap_forever, args=(0.01,), kwargs={"stop": stop, "also": [(broken, 60), (watch, 60)]}, daemon=True
    )
    thread.start()
    thread.join(30)
    assert ran == ["watch"]
