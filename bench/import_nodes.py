"""How long does importing a large inventory take, and how much memory? 1,000 and 10,000 nodes, CSV and YAML.

    .venv/bin/python bench/import_nodes.py [--sizes 1000 10000] [--formats csv yaml] [--profile]

Each case runs in a child process of its own (so its peak RSS is its own) against a throwaway database: a SQLite file
under var/bench/ by default or, when DATABASE_URL names a PostgreSQL server, a database of its own on that server.
The file is what an operator brings: one site, a rack per 8 nodes, two tags, and the nodes (every CSV column) — as a
nodes CSV, or as a YAML document with sites, racks, tags and nodes. It goes through `import_inventory()`, the path
the page, the API and the background job share, into an empty inventory (everything created, one audit entry per
object). Printed: seconds, rows per second, and peak memory: the process's RSS high-water mark less what it held
before the import started (Django, the file's text), and tracemalloc's peak of Python allocations during it.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--formats", nargs="+", choices=["csv", "yaml"], default=["csv", "yaml"])
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25 functions of each case")
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "FORMAT"), help=argparse.SUPPRESS)
    return parser.parse_args()


def nodes_file(size: int, fmt: str) -> str:
    """The file of `size` nodes in `fmt`, made the way an export would write it."""
    racks = [(f"r{number:04d}", number) for number in range(1, -(-size // 8) + 1)]
    nodes = [
        {
            "hostname": f"gpu{number:05d}",
            "role": "compute",
            "status": "ready",
            "rack": racks[(number - 1) // 8][0],
            "u_position": 2 + 5 * ((number - 1) % 8),
            "u_height": 4,
            "management_ip": f"10.{number // 65536}.{number // 256 % 256}.{number % 256}",
            "bmc_address": f"10.200.{number // 256 % 256}.{number % 256}",
            "gpu_sku": "H200 SXM",
            "expected_gpu_count": 8,
            "cpu_model": "Intel Xeon Platinum 8480+",
            "cpu_sockets": 2,
            "cpu_cores": 112,
            "memory_gib": 2048,
            "numa_nodes": 2,
            "tags": ["training", "bench"] if number % 2 else ["bench"],
        }
        for number in range(1, size + 1)
    ]
    if fmt == "csv":
        from apps.inventory.transfer import NODE_CSV_COLUMNS

        lines = [",".join(NODE_CSV_COLUMNS)]
        for node in nodes:
            cells = {**node, "site": "bench", "tags": ";".join(node["tags"])}
            lines.append(",".join(str(cells[column]) for column in NODE_CSV_COLUMNS))
        return "\n".join(lines) + "\n"
    import yaml

    document = {
        "version": 1,
        "sites": [{"slug": "bench", "name": "Bench DC"}],
        "racks": [
            {"site": "bench", "name": name, "row": "A", "position": position, "power_budget_kw": 60}
            for name, position in racks
        ],
        "tags": [{"slug": "training", "name": "Training"}, {"slug": "bench", "name": "Bench"}],
        "nodes": [{**node, "rack": {"site": "bench", "name": node["rack"]}} for node in nodes],
    }
    return yaml.safe_dump(document, sort_keys=False)


def throwaway_database(name: str) -> None:
    """DATABASE_URL pointed at an empty database of this case's own, before Django starts; migrated after."""
    from urllib.parse import urlparse, urlunparse

    parsed = urlparse(os.environ.get("DATABASE_URL", ""))
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        import psycopg

        database = f"{parsed.path.lstrip('/') or 'rackpilot'}_{name.replace('-', '_')}"
        with psycopg.connect(urlunparse(parsed._replace(path="/postgres")), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{database}"')
        os.environ["DATABASE_URL"] = urlunparse(parsed._replace(path=f"/{database}"))
    else:
        path = ROOT / "var" / "bench" / f"{name}.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"


def child(size: int, fmt: str, profile: bool) -> None:
    throwaway_database(f"import-{size}-{fmt}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("RACKPILOT_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    import tracemalloc

    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from apps.inventory.models import Rack, Site, Tag
    from apps.inventory.transfer import import_inventory

    text = nodes_file(size, fmt)
    if fmt == "csv":  # the CSV names racks and tags; the inventory must hold them (the YAML brings its own)
        site = Site.objects.create(slug="bench", name="Bench DC")
        Rack.objects.bulk_create(
            [
                Rack(site=site, name=f"r{n:04d}", row="A", position=n, power_budget_kw=60)
                for n in range(1, -(-size // 8) + 1)
            ]
        )
        Tag.objects.bulk_create([Tag(slug="training", name="Training"), Tag(slug="bench", name="Bench")])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started, cpu = time.perf_counter(), time.process_time()
    result = import_inventory(text=text, fmt=fmt)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if profiler:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from django.db import connection

    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "created": result.totals.created,
                "rss_growth": peak - before,
                "rss_peak": peak,
                "traced": traced,
                "file_mib": len(text.encode()) / 2**20,
                "database": connection.vendor,
            }
        )
    )


def main() -> None:
    args = parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.profile)
        return
    print(f"Inventory import into an empty inventory ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    header = (
        f"{'file':<16} {'MiB':>6} {'objects':>8} {'seconds':>8} {'cpu s':>7} {'rows/s':>7} "
        f"{'peak RSS +MiB':>14} {'traced MiB':>11}"
    )
    print(header)
    print("-" * len(header))
    database = ""
    for size in args.sizes:
        for fmt in args.formats:
            command = [sys.executable, __file__, "--child", str(size), fmt] + (["--profile"] if args.profile else [])
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            if done.returncode:
                raise SystemExit(f"{size} {fmt}: failed\n{done.stderr[-3000:]}")
            if args.profile:
                print(done.stderr[-6000:])
            r = json.loads(done.stdout.strip().splitlines()[-1])
            database = r["database"]
            print(
                f"{f'{size:,} nodes {fmt}':<16} {r['file_mib']:>6.1f} {r['created']:>8,} {r['seconds']:>8.1f} "
                f"{r['cpu']:>7.1f} {r['created'] / r['seconds']:>7.0f} {r['rss_growth']:>14.0f} {r['traced']:>11.0f}"
            )
    print(f"(database: {database}; objects: created, racks, tags and the site included for YAML; cpu s: this")
    print(" process's CPU time, the database's included for SQLite; peak RSS +MiB: the high-water mark less what the")
    print(" process held before the import; traced MiB: tracemalloc's peak of Python allocations during the import)")


if __name__ == "__main__":
    main()
