"""Real Celery worker and beat processes against real Redis and the test database: a job runs; a SIGKILLed worker is
seen as lost by beat's own reaper with no worker alive, its job failed "worker lost" (or its rerunnable shard
re-queued to a live worker, run once more); a system task runs while 500 shards are still queued ahead of it on the
jobs queue; the unacked message does not run a shard again. How soon each happens is timing, which a loaded machine
decides: bench/chaos.py measures it; these tests assert what happens and in which order."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from kombu import Connection

from apps.jobs import services
from apps.jobs.choices import JobStatus, ShardStatus, StepStatus
from apps.jobs.models import Job, JobEvent, JobShard, JobStep
from apps.jobs.tasks import reap, run_shard
from apps.nodeexec.local import marked_groups
from tests import factories
from tests.redis_server import REDIS, PrivateRedis, redis_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = f"{quote(s['USER'])}:{quote(s['PASSWORD'])}@" if s["USER"] else ""
    return f"postgres://{auth}{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


# The production defaults' ratio (stale 20 s, reaper every 5 s) scaled down by 5.
STALE, REAPER = 4, 1


def _celery(*args, log: Path, redis_url: str = REDIS, **extra_env: str) -> subprocess.Popen:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        DATABASE_URL=_database_url(),
        RACKPILOT_SECRET_KEY="integration-test",
        RACKPILOT_SECRETS_KEY=",".join(settings.RACKPILOT_SECRETS_KEYS),
        RACKPILOT_JOB_STALE_SECONDS=str(STALE),
        RACKPILOT_JOB_REAPER_SECONDS=str(REAPER),
        RACKPILOT_EVENT_FLUSH_MS="50",
        RACKPILOT_JOB_CANCEL_POLL_MS="200",
        PYTHONPATH=str(ROOT),
        **extra_env,
    )
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", *args],
        cwd=ROOT,
        env=env,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


# The worker as docker/compose.yaml and the Makefile start it (prefork).
WORKER = ("worker", "--without-gossip", "--without-mingle", "--without-heartbeat")


def _send(job, redis_url: str = REDIS):
    with Connection(redis_url) as broker:
        for shard in job.shards.all():
            run_shard.apply_async(args=[str(job.public_id), shard.index], task_id=shard.task_id, connection=broker)


def _wait(predicate, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def _stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def nodes(db, monkeypatch):
    redis_or_skip(flush=True)
    monkeypatch.setattr(services, "enqueue", lambda job: None)  # sent explicitly to the test Redis below
    return [factories.make_node(hostname=f"w{i}") for i in range(2)]


def _job(kind, nodes, **parameters):
    return services.create_job(
        kind=kind,
        targets=services.TargetSpec(nodes=tuple(n.hostname for n in nodes)),
        parameters=parameters,
        transport="local",
    )


@pytest.mark.wirings  # a worker process on the test database: SQLite's file
def test_a_worker_process_runs_a_job(nodes, tmp_path):
    worker = _celery(
        "worker", "--pool", "solo", "--loglevel", "INFO", "--hostname", "it1@%h", log=tmp_path / "worker.log"
    )
    try:
        job = _job("shell-check", nodes, commands=["uname", "hostname"])
        _send(job)
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 60), (tmp_path / "worker.log").read_text()
    finally:
        _stop(worker)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert JobStep.objects.filter(job=job, status=StepStatus.SUCCEEDED).count() == 4
    assert JobEvent.objects.filter(job=job, message__startswith="shard 0: 2 nodes on it1@").exists()


def _beat(tmp_path, **extra_env) -> subprocess.Popen:
    """Celery beat alone, as compose and `make up` run it: it reaps in a thread of its own (portal/celery.py)."""
    schedule = str(tmp_path / "beat-schedule")
    return _celery("beat", "--loglevel", "INFO", "--schedule", schedule, log=tmp_path / "beat.log", **extra_env)


def _wait_for_log(path: Path, text: str, timeout: float = 60) -> None:
    assert _wait(lambda: path.exists() and text in path.read_text(errors="replace"), timeout), (
        path.read_text(errors="replace") if path.exists() else f"{path} missing"
    )


def test_a_killed_worker_is_seen_lost_by_beat_alone_and_its_job_fails(nodes, tmp_path):
    """No worker left alive: beat's own reaper thread ends the job once its heartbeat is STALE seconds old (printed,
    not asserted: bench/chaos.py times it), and ends the commands the dead worker left running (same host). A kind
    with no re-run left ends "worker lost"."""
    no_rerun = {"RACKPILOT_JOB_WORKER_LOSS_RERUNS": "0"}
    worker = _celery(
        *WORKER,
        "--pool",
        "solo",
        "--loglevel",
        "INFO",
        "--hostname",
        "doomed@%h",
        "-Q",
        "jobs",
        log=tmp_path / "worker.log",
        **no_rerun,
    )
    beat = _beat(tmp_path, **no_rerun)
    try:
        _wait_for_log(tmp_path / "beat.log", "reaping stale jobs in-process every 1 s")
        job = _job("sleep", nodes, seconds=300)
        _send(job)
        assert _wait(lambda: JobStep.objects.filter(job=job, status=StepStatus.RUNNING).count() == 2, 60), (
            tmp_path / "worker.log"
        ).read_text()
        marker = f"{job.public_id}:0"
        assert len(marked_groups(marker)) == 2  # each sleep in its own session, marked RACKPILOT_JOB=<job>:<shard>
        os.killpg(worker.pid, signal.SIGKILL)  # the worker; the sleeps it started live on, reparented to init
        killed_at = timezone.now()
        worker.wait()
        assert len(marked_groups(marker)) == 2
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 60), (tmp_path / "beat.log").read_text()
        # The reaper ends the commands the dead worker left running (found by their marker) as it ends the job.
        ended = JobEvent.objects.filter(job=job, message__startswith="ended 2 process groups of shard 0")
        assert _wait(ended.exists, 30), (tmp_path / "beat.log").read_text()
    finally:
        _stop(worker)
        _stop(beat)
    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    lost = JobEvent.objects.get(job=job, level="error", message__startswith="worker lost: doomed@")
    detected = (lost.created - killed_at).total_seconds()
    print(f"worker loss seen {detected:.2f} s after SIGKILL (stale {STALE} s + reaper {REAPER} s)")
    assert set(JobStep.objects.filter(job=job).values_list("status", flat=True)) == {StepStatus.ERROR}
    assert JobEvent.objects.filter(job=job, message__startswith="shard 0:").count() == 1  # never started again
    # The reaper ended the commands the dead worker left running (found by their marker), not just the job.
    assert _wait(lambda: not marked_groups(marker), 10), marked_groups(marker)


def test_a_killed_workers_rerunnable_shard_is_requeued_to_a_live_worker_and_runs_once_more(nodes, tmp_path):
    doomed = _celery(
        *WORKER,
        "--pool",
        "solo",
        "--loglevel",
        "INFO",
        "--hostname",
        "doomed@%h",
        "-Q",
        "jobs",
        log=tmp_path / "doomed.log",
    )
    beat = _beat(tmp_path)
    live = None
    try:
        job = _job("sleep", nodes, seconds=3)
        _send(job)
        assert _wait(lambda: JobStep.objects.filter(job=job, status=StepStatus.RUNNING).count() == 2, 60), (
            tmp_path / "doomed.log"
        ).read_text()
        live = _celery(
            *WORKER,
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--hostname",
            "live@%h",
            "-Q",
            "jobs",
            log=tmp_path / "live.log",
        )
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 90), (tmp_path / "live.log").read_text()
    finally:
        for process in (doomed, beat, live):
            if process is not None:
                _stop(process)
    job.refresh_from_db()
    shard = job.shards.get()
    assert job.status == JobStatus.SUCCEEDED, [e.message for e in JobEvent.objects.filter(job=job)]
    assert shard.attempts == 2 and shard.worker.startswith("live@")
    requeued = JobEvent.objects.get(job=job, data__requeued=True)
    assert requeued.message.startswith("worker lost: doomed@") and "re-queued" in requeued.message
    assert JobEvent.objects.filter(job=job, message__startswith="shard 0: 2 nodes on").count() == 2  # 2 claims
    finished = JobEvent.objects.filter(job=job, message="sleep-1: succeeded", seq__gt=requeued.seq)
    assert sorted(finished.values_list("hostname", flat=True)) == ["w0", "w1"]  # each cell ran to its end once
    assert set(JobStep.objects.filter(job=job).values_list("status", flat=True)) == {StepStatus.SUCCEEDED}
    # What the lost run left running was ended (by its marker) before its cells were reset and it was sent again.
    swept = JobEvent.objects.get(job=job, message__contains="process groups of shard 0 left running")
    second = JobEvent.objects.filter(job=job, message__startswith="shard 0: 2 nodes on live@").get()
    assert swept.seq < requeued.seq < second.seq


def test_a_system_task_runs_while_500_shards_are_still_queued_ahead_of_it(db, monkeypatch, tmp_path, settings):
    """Shards on `jobs`, the reaper on `system` with its own worker: 500 queued shard messages do not hold it up. Each
    shard sleeps 5 s on the one `jobs` worker, so the reaper's run while nearly all of them still wait shows it went
    past them (order, not a latency a loaded machine stretches)."""
    redis_or_skip(flush=True)
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    settings.RACKPILOT_JOB_SHARD_SIZE = 1
    no_rerun = {"RACKPILOT_JOB_WORKER_LOSS_RERUNS": "0"}
    jobs = _celery(
        *WORKER,
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
        "-Q",
        "jobs",
        "--hostname",
        "jobs@%h",
        log=tmp_path / "jobs.log",
    )
    system = _celery(
        *WORKER,
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
        "-Q",
        "system",
        "--hostname",
        "sys@%h",
        log=tmp_path / "system.log",
        **no_rerun,
    )
    try:
        many = [factories.make_node(hostname=f"m{i:03d}") for i in range(500)]
        long_job = services.create_job(
            kind="sleep",
            targets=services.TargetSpec(nodes=tuple(n.hostname for n in many)),
            parameters={"seconds": 5},
            transport="sim",
        )
        assert long_job.shard_count == 500
        lost_job = _job("sleep", many[:1], seconds=300)
        shard = services.claim_shard(job=lost_job, index=0, worker="gone:1")
        for path in (tmp_path / "jobs.log", tmp_path / "system.log"):
            _wait_for_log(path, "ready.")
        _send(long_job)
        with Connection(REDIS) as broker:
            assert broker.default_channel.client.llen("jobs") >= 498  # queued behind the one or two running
            JobShard.objects.filter(pk=shard.pk).update(heartbeat=timezone.now() - timedelta(seconds=STALE + 1))
            sent = time.monotonic()
            reap.apply_async(connection=broker)
        assert _wait(lambda: JobShard.objects.get(pk=shard.pk).status != ShardStatus.RUNNING, 60, step=0.02), (
            tmp_path / "system.log"
        ).read_text()
        elapsed = time.monotonic() - sent
        with Connection(REDIS) as broker:
            still_queued = broker.default_channel.client.llen("jobs")
        print(f"reap ran {elapsed:.3f} s after it was sent, with {still_queued} shards still queued")
        assert still_queued >= 480, (tmp_path / "system.log").read_text()  # behind them it would wait ~40 min
        services.cancel_job(job=long_job)
    finally:
        _stop(jobs)
        _stop(system)
    assert Job.objects.get(pk=lost_job.pk).summary == "worker lost"


def test_the_worker_survives_a_redis_restart_and_runs_the_next_job(db, monkeypatch, tmp_path):
    """Redis restarts while a shard runs (its acks_late message unacknowledged): the worker reconnects, stays up,
    and a job started afterwards finishes. A Redis of the test's own, never the shared one."""
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    nodes = [factories.make_node(hostname=f"r{i}") for i in range(2)]
    redis = PrivateRedis(tmp_path).start()
    log = tmp_path / "worker.log"
    worker = _celery(
        *WORKER,
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
        "--hostname",
        "bounce@%h",
        log=log,
        redis_url=redis.url,
    )
    try:
        first = _job("sleep", nodes, seconds=4)
        _send(first, redis.url)
        assert _wait(lambda: JobStep.objects.filter(job=first, status=StepStatus.RUNNING).exists(), 60), log.read_text()
        redis.stop()
        redis.start()
        assert _wait(lambda: Job.objects.get(pk=first.pk).is_terminal, 60), log.read_text()
        refused = log.read_text(errors="replace").count("Cannot connect to")
        redis.stop()  # and again while the worker is idle: it notices, fails to reconnect twice, and stays up
        assert _wait(lambda: log.read_text(errors="replace").count("Cannot connect to") >= refused + 2, 60), (
            log.read_text()
        )
        redis.start()
        second = _job("shell-check", nodes, commands=["uname"])
        _send(second, redis.url)
        assert _wait(lambda: Job.objects.get(pk=second.pk).is_terminal, 30), log.read_text()
        assert worker.poll() is None, log.read_text()
    finally:
        _stop(worker)
        redis.stop()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (JobStatus.SUCCEEDED, JobStatus.SUCCEEDED), log.read_text()
    # No consumer step broke on the way (Celery's gossip step did: AttributeError on a connection already gone).
    assert "Unrecoverable error" not in log.read_text() and "Error on restarting" not in log.read_text()
    assert JobEvent.objects.filter(job=first, message__startswith="shard 0:").count() == 1  # not run twice


def test_a_job_queued_before_a_redis_restart_runs_on_a_worker_started_while_redis_was_down(db, monkeypatch, tmp_path):
    """Redis as compose runs it (append-only file): a queued shard message survives its restart, and a worker that
    starts while Redis is down keeps trying and runs the job once Redis is back."""
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    nodes = [factories.make_node(hostname=f"q{i}") for i in range(2)]
    redis = PrivateRedis(tmp_path, persistent=True).start()
    log = tmp_path / "worker.log"
    worker = None
    try:
        job = _job("shell-check", nodes, commands=["uname"])
        _send(job, redis.url)  # no worker yet: the message waits in Redis
        redis.stop()
        worker = _celery(
            *WORKER, "--concurrency", "1", "--loglevel", "INFO", "--hostname", "late@%h", log=log, redis_url=redis.url
        )
        # It keeps trying: two refused connections, and still up.
        assert _wait(lambda: log.exists() and log.read_text(errors="replace").count("Cannot connect to") >= 2, 60), (
            log.read_text() if log.exists() else "no worker log"
        )
        assert worker.poll() is None, log.read_text()
        redis.start()
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 60), log.read_text()
    finally:
        if worker is not None:
            _stop(worker)
        redis.stop()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, log.read_text()
