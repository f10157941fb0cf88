"""How fast is the node list on a large cluster? GET /api/nodes/?limit=100 over 10,000 nodes / 80,000 GPUs (or 100,000).

    .venv/bin/python bench/api_nodes.py [--nodes 10000] [--requests 200] [--keep] [--gc tuned]

Runs against a throwaway database: a SQLite file under var/bench/ by default or, when DATABASE_URL names a PostgreSQL
server, a database of its own on that server (created here, dropped at the end). Requests go through Django's test
client in this process with an API token, so the figures are the application's (middleware, DRF, database, JSON),
without an HTTP server in front. Target: p95 <= 100 ms, and the same number of queries whatever the page. A deep
page is asked both ways: by offset (9000) and by the cursor a client walking with `?cursor=` holds there; and the
last page by cursor.
"""

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inprocess import BenchDatabase, analyze, machine_line, time_get  # noqa: E402  (bench/ is the script's folder)

TARGET_P95_MS = 100.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="compute nodes (8 GPUs each); default 10000")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per case; default 200")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per case first; default 20")
    parser.add_argument("--keep", action="store_true", help="keep the database (a later --keep run reuses it)")
    parser.add_argument(
        "--gc",
        choices=["default", "tuned"],
        default="tuned",
        help="tuned (default): as portal/asgi.py sets the server process up (portal/gctune.py); "
        "default: Python's own settings, for comparison",
    )
    return parser.parse_args()


def load_inventory(nodes: int) -> tuple[float, int, int]:
    from django.core.management import call_command

    from apps.core.audit import audit_context
    from apps.core.choices import ChangeSource
    from apps.inventory.demo import load_cluster
    from apps.inventory.models import Gpu, Node

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    with audit_context(source=ChangeSource.COMMAND):
        load_cluster(fleet_shape(nodes))
    analyze()
    return time.perf_counter() - started, Node.objects.count(), Gpu.objects.count()


def fleet_shape(nodes: int):
    """8 nodes a rack as the demo has them, or 16 past what three tiers of 128-port switches hold at 8 (63,488
    nodes: 124 pods of 64 racks): a leaf is non-blocking for 16, and the list's queries do not depend on it."""
    from apps.inventory.demo import ClusterShape

    try:
        return ClusterShape(compute_nodes=nodes, nodes_per_rack=8)
    except ValueError:
        return ClusterShape(compute_nodes=nodes, nodes_per_rack=16)


def client_with_token():
    from datetime import timedelta

    from django.test import Client
    from django.utils import timezone

    from apps.accounts.choices import Role
    from apps.accounts.models import User
    from apps.tokens.services import create_token

    user, _ = User.objects.get_or_create(username="bench", defaults={"role": Role.VIEWER})
    _, secret = create_token(user=user, name="bench", expires=timezone.now() + timedelta(days=1))
    return Client(HTTP_AUTHORIZATION=f"Token {secret}", HTTP_HOST="127.0.0.1")


def deep_offset(node_count: int) -> int:
    return max(0, min(9000, node_count - 100))


def deep_cursor(offset: int) -> str:
    """The `next` cursor a client walking by cursor holds at `offset`: the last row before it, in the list's order."""
    from apps.core.pagination import encode_cursor
    from apps.inventory.models import Node

    if offset == 0:
        return ""
    hostname, pk = Node.objects.order_by("hostname", "pk").values_list("hostname", "pk")[offset - 1]
    return encode_cursor([Node._meta.label, "hostname", "pk"], [hostname, pk])


def measure(client, path: str, requests: int, warmup: int) -> dict:
    result = time_get(client, path, requests, warmup)
    result["rows"] = len(result.pop("response").json()["results"])
    return result


def main() -> None:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    with BenchDatabase(
        "api_nodes_bench" if os.environ.get("DATABASE_URL") else "api_nodes", keep=args.keep
    ) as database:
        import django

        django.setup()
        print(f"Loading {args.nodes:,} compute nodes into {database.label} ...", flush=True)
        seconds, node_count, gpu_count = load_inventory(args.nodes)
        print(f"Loaded in {seconds:.1f} s: {node_count:,} nodes, {gpu_count:,} GPUs (load_cluster, bulk_create)\n")

        client = client_with_token()
        gc.collect()  # what the load left behind is not the requests' to pay for
        if args.gc == "tuned":
            from portal.gctune import tune_for_serving

            tune_for_serving()  # what portal/asgi.py does in the server process
        # The last case resolves the tag's slug first: one query more, the same for any page.
        deep, last = deep_cursor(deep_offset(node_count)), deep_cursor(max(node_count - 100, 0))
        cases = [
            "/api/nodes/?limit=100",
            f"/api/nodes/?limit=100&offset={deep_offset(node_count)}",
            "/api/nodes/?limit=100&cursor=",
            f"/api/nodes/?limit=100&cursor={deep}",
            f"/api/nodes/?limit=100&cursor={last}",
            "/api/nodes/?limit=10",
            "/api/nodes/?limit=100&status=ready&tag=training",
        ]
        results = {path: measure(client, path, args.requests, args.warmup) for path in cases}

    print(f"{args.requests} timed requests per case after {args.warmup} warm-up, Django test client, API token")
    gc_line = "Python's defaults" if args.gc == "default" else "start-up frozen, young generation every 50,000"
    print(f"(garbage collector: {gc_line}; --gc tuned/default)")
    print(machine_line())
    target = f"p95 <= {TARGET_P95_MS:.0f} ms"
    header = (
        f"{'request':<56} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'cpu ms':>7} {'queries':>7} {'rows':>5}  {target}"
    )
    print(header)
    print("-" * len(header))
    for path, r in results.items():
        verdict = "yes" if r["p95"] <= TARGET_P95_MS else "NO"
        figures = (
            f"{r['p50']:>7.1f} {r['p95']:>7.1f} {r['max']:>7.1f} {r['cpu']:>7.1f} {r['queries']:>7} {r['rows']:>5}"
        )
        print(f"{shorten(path, {deep: '<deep>', last: '<last page>'}):<56} {figures}  {verdict}")
    print("(p50/p95/max: wall time; cpu ms: median CPU time of this process per request, the database's included for")
    print(" SQLite, not for PostgreSQL, whose server works in its own process)")
    first, offset_page = results[cases[0]], results[cases[1]]
    cursor_page, last_page = results[cases[3]], results[cases[4]]
    print(
        f"\nDeep page against the first (p95): offset {offset_page['p95'] / first['p95']:.2f}x, "
        f"cursor {cursor_page['p95'] / first['p95']:.2f}x, the last by cursor {last_page['p95'] / first['p95']:.2f}x"
    )
    counts = {r["queries"] for path, r in results.items() if "tag=" not in path and "cursor" not in path}
    constant = "constant" if len(counts) == 1 else "NOT constant"
    listed = "/".join(map(str, sorted(counts)))
    print(f"\nQueries per unfiltered request (token, count, page, counts, tags): {listed}, {constant}")
    met = all(r["p95"] <= TARGET_P95_MS for r in results.values()) and len(counts) == 1
    print(f"Target (p95 <= {TARGET_P95_MS:.0f} ms, constant queries): {'met' if met else 'NOT met'}")


def shorten(path: str, labels: dict[str, str]) -> str:
    # A cursor is some 60 characters of base64: the table names it.
    head, _, cursor = path.partition("cursor=")
    return f"{head}cursor={labels[cursor]}" if cursor else path


if __name__ == "__main__":
    main()
