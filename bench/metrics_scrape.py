"""How long does a Prometheus scrape of Rackpilot's /metrics take? The demo cluster (32 GPU nodes + management),
a BMC on every node, and a few thousand jobs of every kind and state.

    .venv/bin/python bench/metrics_scrape.py [--jobs 5000] [--requests 200] [--keep]

Runs against a throwaway database: a SQLite file under var/bench/ by default or, when DATABASE_URL names a PostgreSQL
server, a database of its own on that server (created here, dropped at the end). Requests go through Django's test
client in this process, so the figures are the application's (middleware, the GROUP BY queries, the text format),
without an HTTP server in front. Target: p95 <= 50 ms.
"""

import argparse
import itertools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inprocess import BenchDatabase, analyze, machine_line, time_get  # noqa: E402  (bench/ is the script's folder)

TARGET_P95_MS = 50.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs in the database; default 5000")
    parser.add_argument("--requests", type=int, default=200, help="timed scrapes; default 200")
    parser.add_argument("--warmup", type=int, default=20, help="untimed scrapes first; default 20")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return parser.parse_args()


def load(jobs: int) -> tuple[int, int]:
    from django.core.management import call_command

    from apps.core.audit import audit_context
    from apps.core.choices import ChangeSource
    from apps.inventory.demo import DEMO, load_cluster
    from apps.inventory.models import Node
    from apps.jobs.choices import JobStatus
    from apps.jobs.kinds import KINDS
    from apps.jobs.models import Job
    from apps.monitoring.models import Bmc

    call_command("migrate", verbosity=0)
    with audit_context(source=ChangeSource.COMMAND):
        load_cluster(DEMO)
    Bmc.objects.bulk_create(
        Bmc(node=node, user="admin", polls_ok=1000 + node.pk, polls_failed=node.pk % 3, last_result="ok")
        for node in Node.objects.all()
    )
    kinds = itertools.cycle(sorted(KINDS))
    statuses = itertools.cycle(JobStatus.values)
    Job.objects.bulk_create(
        (Job(kind=next(kinds), transport="sim", status=next(statuses), last_seq=40 + n % 200) for n in range(jobs)),
        batch_size=1000,
    )
    analyze()
    return Node.objects.count(), Job.objects.count()


def measure(requests: int, warmup: int) -> dict:
    from django.test import Client

    result = time_get(Client(HTTP_HOST="127.0.0.1"), "/metrics", requests, warmup)
    body = result.pop("response").content.decode()
    result["samples"] = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    return result


def main() -> None:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    with BenchDatabase("metrics_scrape", keep=args.keep) as database:
        import django

        django.setup()
        nodes, jobs = load(args.jobs)
        result = measure(args.requests, args.warmup)
    print(f"/metrics over {database.label}: {nodes} nodes with a BMC each, {jobs:,} jobs")
    print(f"{args.requests} timed scrapes after {args.warmup} warm-up, Django test client in this process")
    print(machine_line())
    verdict = "yes" if result["p95"] <= TARGET_P95_MS else "NO"
    print(
        f"p50 {result['p50']:.1f} ms  p95 {result['p95']:.1f} ms  max {result['max']:.1f} ms  "
        f"{result['queries']} queries  {result['samples']} samples  p95 <= {TARGET_P95_MS:.0f} ms: {verdict}"
    )


if __name__ == "__main__":
    main()
