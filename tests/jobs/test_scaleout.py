"""Scale-out with real processes: a 512-node simulated job in 16 shards over four job workers (each its own OS
process, `celery -A portal worker -Q jobs --concurrency 1`, as on separate hosts) against real Redis and PostgreSQL.
The shards spread over every worker, and a worker SIGKILLed mid-job loses nothing and runs nothing twice: its shard is
re-queued and runs to its end once on another worker. How the wall time falls with more workers is timing, shown by
bench/scaleout.py, not asserted here (a loaded machine's CPU decides it).

Needs PostgreSQL (DATABASE_URL): several processes writing one SQLite file is not safe. Marked `postgresql`, so a
run on SQLite leaves it out."""

import os
import re
import signal

import pytest
from django.db import connection
from django.test import override_settings

from apps.inventory.choices import NodeRole
from apps.inventory.models import Node
from apps.jobs import services
from apps.jobs.choices import JobStatus, ShardStatus, StepStatus
from apps.jobs.models import Job, JobEvent, JobShard, JobStep
from tests.jobs.test_celery_integration import WORKER, _beat, _celery, _send, _stop, _wait, _wait_for_log
from tests.redis_server import redis_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

# Each node's step sleeps a second, so a shard is still running when its worker is killed and while the other
# workers, waiting on the queue, take the next shards.
NODES, SHARD_SIZE, SECONDS, WORKERS = 512, 32, 1.0, 4


@pytest.fixture
def fleet_db(db, monkeypatch):
    assert connection.vendor == "postgresql"  # the marker leaves this test out of SQLite runs
    redis_or_skip(flush=True)
    monkeypatch.setattr(services, "enqueue", lambda job: None)  # sent explicitly to the test Redis
    Node.objects.bulk_create(
        [Node(hostname=f"scale{i:03d}", role=NodeRole.COMPUTE) for i in range(NODES)], batch_size=500
    )


def _start_job(seconds=SECONDS):
    with override_settings(RACKPILOT_JOB_SHARD_SIZE=SHARD_SIZE):
        job = services.create_job(
            kind="sleep",
            targets=services.TargetSpec(role=NodeRole.COMPUTE),
            parameters={"seconds": seconds},
            transport="sim",
        )
    assert (job.node_count, job.shard_count) == (NODES, NODES // SHARD_SIZE)
    _send(job)
    return job


def _run(job, logs):
    assert _wait(lambda: Job.objects.get(pk=job.pk).is_terminal, 300), "\n".join(p.read_text()[-3000:] for p in logs)


def _claimants(job) -> set[str]:
    """The workers that claimed a shard of the job (a re-queued shard's first claimant too), from its claim events."""
    claims = JobEvent.objects.filter(job=job, message__regex=r"^shard \d+: \d+ nodes? on ")
    return {re.search(r" on (\S+?)@", message)[1] for message in claims.values_list("message", flat=True)}


def test_shards_spread_over_every_worker_and_a_killed_one_loses_nothing(fleet_db, tmp_path):
    logs = [tmp_path / f"w{n}.log" for n in range(WORKERS)]

    def worker(n):
        args = (*WORKER, "-Q", "jobs", "--concurrency", "1", "--loglevel", "INFO", "--hostname", f"fleet{n}@%h")
        return _celery(*args, log=logs[n])

    workers = [worker(n) for n in range(WORKERS)]
    beat = _beat(tmp_path)
    try:
        for log in logs:
            _wait_for_log(log, "ready.")
        lossy = _start_job()  # a second a step: a shard is mid-run when its worker dies
        assert _wait(lambda: JobStep.objects.filter(job=lossy, status=StepStatus.SUCCEEDED).exists(), 120)
        victim_shard = JobShard.objects.filter(job=lossy, status=ShardStatus.RUNNING).order_by("index").first()
        victim = int(victim_shard.worker.split("@")[0].removeprefix("fleet"))
        os.killpg(workers[victim].pid, signal.SIGKILL)
        workers[victim].wait()
        _run(lossy, logs)
    finally:
        for process in (*workers, beat):
            _stop(process)

    # Each idle worker took a shard: four workers ready, sixteen shards queued, one shard at a time each.
    assert _claimants(lossy) == {f"fleet{n}" for n in range(WORKERS)}
    lossy.refresh_from_db()
    assert lossy.status == JobStatus.SUCCEEDED, [e.message for e in JobEvent.objects.filter(job=lossy, level="error")]
    assert not JobStep.objects.filter(job=lossy).exclude(status=StepStatus.SUCCEEDED).exists()  # every cell ended
    requeued = {e.data["shard"]: e.seq for e in JobEvent.objects.filter(job=lossy, data__requeued=True)}
    assert victim_shard.index in requeued
    attempts = dict(JobShard.objects.filter(job=lossy).values_list("index", "attempts"))
    assert attempts == {index: 2 if index in requeued else 1 for index in range(NODES // SHARD_SIZE)}
    claims = JobEvent.objects.filter(job=lossy, message__regex=r"^shard \d+: \d+ nodes? on ").count()
    assert claims == NODES // SHARD_SIZE + len(requeued)  # one claim per shard, one more per re-queue
    assert f"fleet{victim}@" not in JobShard.objects.get(job=lossy, index=victim_shard.index).worker
    # Every cell ran to its end once: after its shard's re-queue for a re-queued shard, once in all for the others.
    finished = JobEvent.objects.filter(job=lossy, message="sleep-1: succeeded")
    per_cell: dict[str, int] = {}
    shard_of = dict(JobStep.objects.filter(job=lossy).values_list("hostname", "shard__index"))
    for hostname, seq in finished.values_list("hostname", "seq"):
        if seq > requeued.get(shard_of[hostname], 0):
            per_cell[hostname] = per_cell.get(hostname, 0) + 1
    assert per_cell == {f"scale{i:03d}": 1 for i in range(NODES)}
