"""Discovery of a whole fleet by Celery job workers: the demo grown to N compute nodes (2,048 by default: 16,384 GPUs,
three fabric tiers), one `discover` job over every compute node on the sim transport, run by 1, 2 and 4 job worker
processes (`celery -A portal worker -Q jobs --concurrency 1` each, as on separate hosts; bench/scaleout.py starts
them). The job is cut into shards (RACKPILOT_JOB_SHARD_SIZE, 256 nodes) that the workers take from Redis: the engine's
own spread, nothing home-made. A first discovery, untimed, records every node's facts; the timed ones read, parse and
reconcile them again, as the periodic discovery does. Prints each run's wall time (the job's creation to its end),
nodes a second, the shards and how many workers they spread over. Target: 2,048 nodes in <= 60 s with four workers.

The simulated nodes answer from a model in the worker's own process, so a discovery is CPU-bound: on this 2-core
machine more than two workers cannot help, and the figures at 512, 1,024 and 2,048 nodes (--nodes) give the cost
curve a node at a time; more hosts, not more processes on one host, is how it grows (docs/scaling.md).

Usage: DATABASE_URL=postgres://… REDIS_URL=redis://…/8 python bench/discover_workers.py [--nodes 2048]
       [--workers 1 2 4] [--keep]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inprocess import BenchDatabase, analyze, machine_line  # noqa: E402  (bench/ is the script's folder)
from scaleout import shared_services_environment, spread, start_worker, stop, wait_ready  # noqa: E402

TARGET_S = 60.0


def load_fleet(nodes: int) -> float:
    from django.core.management import call_command

    from apps.core.audit import audit_context
    from apps.core.choices import ChangeSource
    from apps.inventory.demo import ClusterShape, load_cluster

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    with audit_context(source=ChangeSource.COMMAND):
        load_cluster(ClusterShape(compute_nodes=nodes))
    analyze()
    return time.perf_counter() - started


def discover(workers: int, logs: Path, label: str):
    """(the job, wall seconds) of one discovery of every compute node, run by `workers` job worker processes."""
    from apps.discovery import services
    from apps.inventory.choices import NodeRole
    from apps.inventory.models import Node
    from apps.jobs.models import Job
    from apps.jobs.services import TargetSpec

    hostnames = tuple(
        Node.objects.filter(role=NodeRole.COMPUTE).order_by("hostname").values_list("hostname", flat=True)
    )
    processes = [start_worker(f"{label}{workers}-{n}", logs) for n in range(workers)]
    try:
        wait_ready(processes)
        started = time.monotonic()
        job = services.start_discovery(targets=TargetSpec(nodes=hostnames), transport="sim")  # to Redis on commit
        while Job.objects.get(pk=job.pk).is_active:
            time.sleep(0.2)
        wall = time.monotonic() - started
    finally:
        stop(processes)
    return Job.objects.get(pk=job.pk), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2048, help="compute nodes (8 GPUs each); default 2048")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--keep", action="store_true", help="keep the database (a later --keep run reuses it)")
    args = parser.parse_args()
    shared_services_environment("discover_workers")
    with BenchDatabase(f"discover_workers_{args.nodes}", keep=args.keep, reuse=True) as database:
        import django

        django.setup()
        from django.conf import settings

        from apps.inventory.models import Gpu, Node

        if not database.reused:
            print(f"Loading {args.nodes:,} compute nodes into {database.label} ...", flush=True)
            print(f"Loaded in {load_fleet(args.nodes):.1f} s", flush=True)
        shard_size = settings.RACKPILOT_JOB_SHARD_SIZE
        print(f"{Node.objects.count():,} nodes, {Gpu.objects.count():,} GPUs; shards of {shard_size} nodes")
        logs = Path(tempfile.mkdtemp(prefix="rackpilot-discover-workers-"))
        first, wall = discover(max(args.workers), logs, "first")
        print(f"First discovery (untimed: it records every node's facts): {first.status} in {wall:.1f} s", flush=True)
        print(machine_line())
        print(
            f"{'workers':>7}  {'wall s':>7}  {'nodes/s':>7}  {'shards':>6}  {'workers used':>12}  <= {TARGET_S:.0f} s"
        )
        for count in args.workers:
            job, wall = discover(count, logs, "timed")
            verdict = "yes" if wall <= TARGET_S else "NO"
            print(
                f"{count:>7}  {wall:>7.1f}  {job.node_count / wall:>7.1f}  {job.shards.count():>6}  {spread(job):>12}  "
                f"{verdict} ({job.status})",
                flush=True,
            )


if __name__ == "__main__":
    main()
