"""The engine end to end in-process over the local transport: matrix, events, artifacts, cancel, errors, reaper."""

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from apps.jobs import services
from apps.jobs.choices import JobStatus, ShardStatus, StepStatus
from apps.jobs.events import append_events
from apps.jobs.models import Artifact, Job, JobEvent, JobShard, JobStep
from tests import factories

# The engine's threads writing the database at once: SQLite's one writer or PostgreSQL's row locks (wirings).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.wirings]
ENQUEUE = services.enqueue  # the real one: the no_celery fixture replaces it for every test here


@pytest.fixture
def nodes(db):
    return [factories.make_node(hostname=f"local{i}") for i in range(3)]


def _create(kind, nodes, **parameters):
    return services.create_job(
        kind=kind,
        targets=services.TargetSpec(nodes=tuple(n.hostname for n in nodes)),
        parameters=parameters,
        transport="local",
    )


def assert_gapless(job):
    seqs = list(JobEvent.objects.filter(job=job).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert job.last_seq == len(seqs)


def test_shell_check_fills_the_matrix_events_and_artifacts(nodes, run_shards, fast_jobs):
    job = run_shards(_create("shell-check", nodes, commands=["uname", "hostname"]))
    assert job.status == JobStatus.SUCCEEDED and job.finished and job.started, _debug_events(job)
    cells = JobStep.objects.filter(job=job)
    assert cells.count() == 6 and {c.status for c in cells} == {StepStatus.SUCCEEDED}
    assert {c.exit_code for c in cells} == {0}
    uname = cells.get(hostname="local0", step="uname")
    assert uname.summary.startswith(os.uname().sysname)
    output = JobEvent.objects.filter(job=job, hostname="local1", step="uname", level="output")
    assert output.count() == 1 and os.uname().release in output.get().message
    artifact = Artifact.objects.get(step=uname, stream="stdout")
    assert os.uname().nodename in artifact.text() and artifact.cap_bytes == 1 << 20 and not artifact.truncated
    assert_gapless(job)
    assert JobEvent.objects.filter(job=job).last().message.startswith("job succeeded")


def test_a_failing_command_fails_its_cell_and_the_job(nodes, run_shards, fast_jobs):
    # nvidia-smi is not on this machine: the cell fails with 127 and says why; the others still run.
    job = run_shards(_create("shell-check", nodes[:1], commands=["nvidia-smi-list", "hostname"]))
    assert job.status == JobStatus.FAILED
    missing = JobStep.objects.get(job=job, step="nvidia-smi-list")
    assert missing.exit_code == 127 and "nvidia-smi" in missing.summary
    assert JobStep.objects.get(job=job, step="hostname").status == StepStatus.SUCCEEDED


def test_artifacts_are_capped_and_the_cap_is_noted(nodes, run_shards, fast_jobs):
    fast_jobs.RACKPILOT_ARTIFACT_MAX_BYTES = 64
    fast_jobs.RACKPILOT_JOB_EVENT_LINES_PER_STEP = 3
    job = run_shards(_create("shell-check", nodes[:1], commands=["os-release"]))
    artifact = Artifact.objects.get(step__job=job)
    assert artifact.stored_bytes == 64 and artifact.size_bytes > 64 and artifact.truncated and artifact.cap_bytes == 64
    lines = JobEvent.objects.filter(job=job, level="output")
    assert lines.count() == 3
    assert JobEvent.objects.filter(job=job, message__contains="more output than 3 lines").exists()


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _sleep_pids():
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline[:2] == [b"sleep", b"473"]:
                pids.append(int(pid))
    return pids


def test_cancel_kills_running_commands_and_starts_no_new_ones(nodes, run_shards, fast_jobs, operator):
    job = _create("sleep", nodes, seconds=473, steps=2)
    runner = threading.Thread(target=run_shards, args=(job,))
    runner.start()
    try:
        assert _wait_for(lambda: len(_sleep_pids()) == 3), "the sleeps never started"
        services.cancel_job(job=job, user=operator)
        # Killed, not left to their 473 s (a bound far above the cancel poll and kill grace a loaded machine stretches).
        assert _wait_for(lambda: not _sleep_pids(), timeout=60), "sleep processes still there 60 s after cancel"
    finally:
        runner.join(30)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELED
    assert set(JobStep.objects.filter(job=job, step="sleep-1").values_list("status", flat=True)) == {
        StepStatus.CANCELED
    }
    assert set(JobStep.objects.filter(job=job, step="sleep-2").values_list("status", flat=True)) == {
        StepStatus.CANCELED
    }
    assert JobEvent.objects.filter(job=job, message__startswith="cancel requested by operator").exists()
    assert_gapless(job)


def test_an_unexpected_exception_ends_the_job_in_error_with_the_traceback(nodes, run_shards, fast_jobs, monkeypatch):
    from apps.jobs import executor

    def explode(job, shard):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(executor, "node_targets", explode)
    job = run_shards(_create("sleep", nodes[:1], seconds=0))
    assert job.status == JobStatus.ERROR
    event = JobEvent.objects.get(job=job, message__startswith="shard 0 stopped with an error", level="error")
    assert "disk on fire" in event.message
    assert "Traceback" in event.data["traceback"] and "explode" in event.data["traceback"]
    assert JobShard.objects.get(job=job).status == ShardStatus.ERROR


def test_a_shard_runs_once_even_if_delivered_twice(nodes, run_shards, fast_jobs):
    from apps.jobs import executor

    job = run_shards(_create("sleep", nodes[:1], seconds=0))
    assert job.status == JobStatus.SUCCEEDED
    events = job.last_seq
    assert executor.run_shard(job_public_id=str(job.public_id), index=0) == "claimed-by-other"
    job.refresh_from_db()
    assert job.last_seq == events


def test_large_jobs_are_split_into_shards_and_finish_when_all_have(db, run_shards, fast_jobs):
    fast_jobs.RACKPILOT_JOB_SHARD_SIZE = 2
    many = [factories.make_node(hostname=f"s{i}") for i in range(5)]
    job = _create("sleep", many, seconds=0)
    assert job.shard_count == 3
    assert list(JobShard.objects.filter(job=job).values_list("index", flat=True)) == [0, 1, 2]
    assert [s.task_id for s in job.shards.all()] == [str(job.public_id), f"{job.public_id}-1", f"{job.public_id}-2"]
    from apps.jobs import executor

    executor.run_shard(job_public_id=str(job.public_id), index=0)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING  # two shards still queued
    job = run_shards(job)
    assert job.status == JobStatus.SUCCEEDED
    assert JobStep.objects.filter(job=job, status=StepStatus.SUCCEEDED).count() == 5
    assert_gapless(job)


def test_concurrent_writers_keep_seq_gapless(nodes, fast_jobs):
    job = _create("sleep", nodes[:1], seconds=0)

    def write():
        from django.db import connection

        for _ in range(20):
            append_events(job.pk, [{"message": "x"}] * 5)
        connection.close()

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    job.refresh_from_db()
    assert job.last_seq == 1 + 4 * 20 * 5
    assert_gapless(job)


def test_reaper_fails_jobs_whose_worker_stopped_beating(nodes, fast_jobs):
    fast_jobs.RACKPILOT_JOB_WORKER_LOSS_RERUNS = 0  # no re-run left: "worker lost" (re-runs: test_worker_loss.py)
    job = _create("sleep", nodes[:2], seconds=100)
    shard = services.claim_shard(job=job, index=0, worker="gone-host:123")
    JobStep.objects.filter(job=job, hostname="local0").update(status=StepStatus.RUNNING)
    assert services.reap_stale_jobs() == 0  # fresh heartbeat
    JobShard.objects.filter(pk=shard.pk).update(heartbeat=timezone.now() - timedelta(seconds=31))
    assert services.reap_stale_jobs() == 1
    job.refresh_from_db()
    assert job.status == JobStatus.ERROR and "worker lost" in job.summary
    assert JobStep.objects.get(job=job, hostname="local0").status == StepStatus.ERROR
    assert JobStep.objects.get(job=job, hostname="local1").status == StepStatus.SKIPPED
    assert JobEvent.objects.filter(job=job, message__startswith="worker lost: gone-host:123").exists()


def test_prune_removes_old_output_only(nodes, run_shards, fast_jobs):
    old = run_shards(_create("shell-check", nodes[:1], commands=["uname"]))
    new = run_shards(_create("shell-check", nodes[:1], commands=["uname"]))
    Job.objects.filter(pk=old.pk).update(finished=timezone.now() - timedelta(days=31))
    services.prune_old_output()
    assert not JobEvent.objects.filter(job=old).exists() and not Artifact.objects.filter(step__job=old).exists()
    assert JobEvent.objects.filter(job=new).exists() and Artifact.objects.filter(step__job=new).exists()
    assert JobStep.objects.filter(job=old).exists()


def test_logging_inside_a_job_becomes_events(nodes, run_shards, fast_jobs):
    import logging

    from apps.jobs.kinds import KINDS, JobKind, StepSpec, register_kind

    class Chatty(JobKind):
        name = "test-chatty"

        def steps(self, parameters):
            logging.getLogger("apps.jobs.tests").warning("planning %d step", 1)
            return [StepSpec(name="true", command="true")]

    register_kind(Chatty)
    try:
        job = run_shards(_create("test-chatty", nodes[:1]))
    finally:
        KINDS.pop("test-chatty")
    assert JobEvent.objects.filter(job=job, level="warning", message="planning 1 step").exists()


def test_a_kinds_cell_record_is_what_the_cell_records(nodes, run_shards, fast_jobs):
    from apps.jobs.kinds import KINDS, CellRecord, JobKind, StepSpec, register_kind

    class Judged(JobKind):
        name = "test-judged"

        def steps(self, parameters):
            return [StepSpec(name="name", command="hostname")]

        def cell_record(self, target, step, result):
            # The target, the step and the result in hand: a kind judges a cell without keeping state for it.
            printed = result.stdout.decode().strip()
            status = StepStatus.FAILED if target.hostname == "local1" else StepStatus.SUCCEEDED
            return CellRecord(status, f"{target.hostname} {step.name}", {"printed": printed, "exit": result.exit_code})

    register_kind(Judged)
    try:
        job = run_shards(_create("test-judged", nodes[:2]))
    finally:
        KINDS.pop("test-judged")
    cells = {cell.hostname: (cell.status, cell.summary) for cell in JobStep.objects.filter(job=job)}
    assert cells == {"local0": (StepStatus.SUCCEEDED, "local0 name"), "local1": (StepStatus.FAILED, "local1 name")}
    assert job.status == JobStatus.FAILED  # the job's end counts the kind's statuses, not the exit codes
    finished = JobEvent.objects.get(job=job, hostname="local1", step="name", message__startswith="name: ")
    assert finished.message == "name: failed — local1 name"
    assert finished.data["printed"] == os.uname().nodename and finished.data["exit"] == 0
    assert finished.data["status"] == StepStatus.FAILED


def test_enqueue_sends_each_queued_shard_to_run_shard_by_name(nodes, monkeypatch, settings):
    from apps.jobs import tasks

    settings.RACKPILOT_JOB_SHARD_SIZE = 2
    sent = []
    monkeypatch.setattr(
        tasks.run_shard, "apply_async", lambda args=None, kwargs=None, **options: sent.append((args, options))
    )
    job = _create("shell-check", nodes, commands=["uname"])
    JobShard.objects.filter(job=job, index=1).update(status=ShardStatus.CANCELED)
    ENQUEUE(job)
    assert sent == [((str(job.public_id), 0), {"task_id": str(job.public_id)})]  # the canceled shard is not sent


def _debug_events(job):  # pragma: no cover - a helper for reading failures
    return [(e.seq, e.level, e.message, e.data.get("traceback", "")[-800:]) for e in JobEvent.objects.filter(job=job)]
