"""A real Celery worker process against real Redis and the test database: a job runs; a SIGKILLed worker's job
is failed by the reaper (run by Celery beat) as "worker lost", and the unacked message does not run it again."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from kombu import Connection

from apps.jobs import services
from apps.jobs.choices import JobStatus, StepStatus
from apps.jobs.models import Job, JobEvent, JobStep
from apps.jobs.tasks import run_shard
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


def _celery(*args, log: Path, redis_url: str = REDIS) -> subprocess.Popen:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        DATABASE_URL=_database_url(),
        RACKPILOT_SECRET_KEY="integration-test",
        RACKPILOT_SECRETS_KEY=",".join(settings.RACKPILOT_SECRETS_KEYS),
        RACKPILOT_JOB_HEARTBEAT_SECONDS="1",
        RACKPILOT_JOB_STALE_SECONDS="4",
        RACKPILOT_JOB_REAPER_SECONDS="2",
        RACKPILOT_EVENT_FLUSH_MS="50",
        RACKPILOT_JOB_CANCEL_POLL_MS="200",
        PYTHONPATH=str(ROOT),
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


def _wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
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
    assert JobEvent.objects.filter(job=job, message__startswith="shard 0: 2 node(s) on it1@").exists()


def test_a_killed_worker_is_reaped_and_its_job_fails_and_does_not_run_twice(nodes, tmp_path):
    worker = _celery(
        "worker", "--pool", "solo", "--loglevel", "INFO", "--hostname", "doomed@%h", log=tmp_path / "worker.log"
    )
    survivor = None
    try:
        job = _job("sleep", nodes, seconds=300)
        _send(job)
        assert _wait(lambda: JobStep.objects.filter(job=job, status=StepStatus.RUNNING).count() == 2, 60), (
            tmp_path / "worker.log"
        ).read_text()
        marker = f"{job.public_id}:0"
        assert len(marked_groups(marker)) == 2  # each sleep in its own session, marked RACKPILOT_JOB=<job>:<shard>
        os.killpg(worker.pid, signal.SIGKILL)  # the worker; the sleeps it started live on, reparented to init
        worker.wait()
        killed_at = time.monotonic()
        assert len(marked_groups(marker)) == 2
        # A second worker with beat embedded: beat runs the reaper; the first worker's message stays unacked.
        survivor = _celery(
            "worker",
            "--beat",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--hostname",
            "survivor@%h",
            "--schedule",
            str(tmp_path / "beat-schedule"),
            log=tmp_path / "survivor.log",
        )
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 60), (tmp_path / "survivor.log").read_text()
        assert time.monotonic() - killed_at < 60
        time.sleep(2)
    finally:
        _stop(worker)
        if survivor is not None:
            _stop(survivor)
    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and job.summary == "worker lost"
    assert set(JobStep.objects.filter(job=job).values_list("status", flat=True)) == {StepStatus.ERROR}
    assert JobEvent.objects.filter(job=job, level="error", message__startswith="worker lost: doomed@").exists()
    assert JobEvent.objects.filter(job=job, message__startswith="shard 0:").count() == 1  # never started again
    # The reaper ended the commands the dead worker left running (found by their marker), not just the job.
    assert _wait(lambda: not marked_groups(marker), 10), marked_groups(marker)
    assert JobEvent.objects.filter(job=job, message__startswith="ended 2 process group(s) of shard 0").exists()


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
        redis.stop()  # and again while the worker is idle, for longer than its heartbeat interval
        time.sleep(6)
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
        worker = _celery(*WORKER, "--concurrency", "1", "--hostname", "late@%h", log=log, redis_url=redis.url)
        time.sleep(3)
        assert worker.poll() is None, log.read_text()
        redis.start()
        assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 60), log.read_text()
    finally:
        if worker is not None:
            _stop(worker)
        redis.stop()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, log.read_text()
