"""Scale-out benchmark: one simulated job on N nodes (sleep on the sim transport, shards of --shard-size) run by 1, 2
and 4 job worker processes (`celery -A portal worker -Q jobs --concurrency 1` each, as on separate hosts) against
the PostgreSQL and Redis of DATABASE_URL and REDIS_URL. Prints the wall time for each worker count, the speed-up
over one worker and how many workers the shards spread over; with --kill, SIGKILLs one of the most workers mid-job
and reports what the reaper (a thread of this process, as in beat) re-queued and that every cell ran to its end once.

The sim `sleep` waits rather than computes, so the figures show how shards spread, not CPU scaling: CPU-bound
commands on a machine with few cores (this one has 2) would stop scaling at the core count. Nodes `scaleout-NNN`
are created once and kept; each run adds a job. Never point it at a Redis database others use.

Usage: DATABASE_URL=postgres://… REDIS_URL=redis://…/8 python bench/scaleout.py [--nodes 512] [--shard-size 32]
       [--seconds 0.3] [--workers 1 2 4] [--kill]
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Scaled-down worker loss (the defaults' 20 s : 5 s ratio), for --kill; the workers inherit these.
FAST = {"RACKPILOT_JOB_STALE_SECONDS": "4", "RACKPILOT_JOB_REAPER_SECONDS": "1", "RACKPILOT_JOB_CANCEL_POLL_MS": "200"}


def shared_services_environment(bench: str) -> None:
    """What a bench whose worker processes share the database and the broker needs before Django starts: PostgreSQL
    (SQLite cannot be shared between processes) and Redis, and the settings its workers inherit."""
    if not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")):
        sys.exit(f"bench/{bench}.py needs DATABASE_URL (PostgreSQL: processes share it) and REDIS_URL")
    os.environ.setdefault("RACKPILOT_SECRET_KEY", f"bench-{bench}")
    os.environ.setdefault("RACKPILOT_LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def start_worker(name: str, logs: Path) -> tuple[subprocess.Popen, Path]:
    log = logs / f"{name}.log"
    argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", "jobs", "--concurrency", "1"]
    argv += ["--hostname", f"{name}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    argv += ["--without-heartbeat"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RACKPILOT_LOG_LEVEL": "INFO"}
    with open(log, "ab") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, log


def wait_ready(workers) -> None:
    deadline = time.monotonic() + 120
    for process, log in workers:
        while "ready." not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"worker did not start; see {log}")
            time.sleep(0.2)


def stop(workers) -> None:
    for process, _ in workers:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process, _ in workers:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_job(hostnames, *, shard_size: int, seconds: float, on_running=None):
    from django.test import override_settings

    from apps.jobs import services
    from apps.jobs.models import Job

    with override_settings(RACKPILOT_JOB_SHARD_SIZE=shard_size):
        job = services.create_job(
            kind="sleep",
            targets=services.TargetSpec(nodes=tuple(hostnames)),
            parameters={"seconds": seconds},
            transport="sim",
        )  # enqueued on commit, to REDIS_URL
    started = time.monotonic()
    fired = False
    while Job.objects.get(pk=job.pk).is_active:
        if on_running is not None and not fired:
            fired = on_running(job)
        time.sleep(0.1)
    return Job.objects.get(pk=job.pk), time.monotonic() - started


def spread(job) -> int:
    return len({w.split(":")[0] for w in job.shards.values_list("worker", flat=True)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--shard-size", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=0.3, help="each node's sleep (sim; at most 5 s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--kill", action="store_true", help="also SIGKILL a worker mid-job with the most workers")
    args = parser.parse_args()
    shared_services_environment("scaleout")
    os.environ.update(FAST)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from apps.inventory.choices import NodeRole
    from apps.inventory.models import Node
    from apps.jobs.models import JobEvent, JobStep

    call_command("migrate", verbosity=0)
    hostnames = [f"scaleout-{i:04d}" for i in range(args.nodes)]
    have = set(Node.objects.filter(hostname__in=hostnames).values_list("hostname", flat=True))
    Node.objects.bulk_create([Node(hostname=h, role=NodeRole.COMPUTE) for h in hostnames if h not in have])
    shards = -(-args.nodes // args.shard_size)
    print(f"{args.nodes} simulated nodes, {shards} shards of {args.shard_size}, sleep {args.seconds:g} s per node")
    print(f"{'workers':>7}  {'wall s':>7}  {'speed-up':>8}  {'workers used':>12}   (speed-up: over the first row)")
    logs = Path(tempfile.mkdtemp(prefix="rackpilot-scaleout-"))
    base = None
    for count in args.workers:
        workers = [start_worker(f"scale{count}-{n}", logs) for n in range(count)]
        try:
            wait_ready(workers)
            job, wall = run_job(hostnames, shard_size=args.shard_size, seconds=args.seconds)
        finally:
            stop(workers)
        base = base or wall
        print(f"{count:>7}  {wall:>7.1f}  {base / wall:>7.2f}x  {spread(job):>12}   ({job.status})", flush=True)
    if not args.kill:
        return
    from portal.celery import reap_forever

    stop_reaper = threading.Event()
    threading.Thread(target=reap_forever, args=(1.0,), kwargs={"stop": stop_reaper}, daemon=True).start()
    count = max(args.workers)
    workers = [start_worker(f"kill{count}-{n}", logs) for n in range(count)]
    by_name = {f"kill{count}-{n}": process for n, (process, _) in enumerate(workers)}
    victim = {}

    def kill_one(job) -> bool:
        shard = job.shards.filter(status="running", steps__status="succeeded").order_by("index").first()
        if shard is None:
            return False
        victim["name"], victim["shard"] = shard.worker.split("@")[0], shard.index
        os.killpg(by_name[victim["name"]].pid, signal.SIGKILL)
        return True

    try:
        wait_ready(workers)
        job, wall = run_job(hostnames, shard_size=args.shard_size, seconds=args.seconds * 3, on_running=kill_one)
    finally:
        stop_reaper.set()
        stop(workers)
    requeued = JobEvent.objects.filter(job=job, data__requeued=True).count()
    claims = JobEvent.objects.filter(job=job, message__regex=r"^shard \d+: \d+ node\(s\) on ").count()
    ended = JobStep.objects.filter(job=job, status="succeeded").count()
    print(
        f"kill: {victim.get('name')} SIGKILLed running shard {victim.get('shard')}; job {job.status} in {wall:.1f} s; "
        f"{requeued} shard(s) re-queued, {claims} claims for {shards} shards, {ended}/{args.nodes} cells succeeded"
    )


if __name__ == "__main__":
    main()
