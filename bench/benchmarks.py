"""The NCCL sweep on the simulated demo cluster with one degraded cable: rounds and tests to isolate it, wall time, CPU;
then the server time of the benchmark pages over the finished sweep.

    .venv/bin/python bench/benchmarks.py                 # 32 compute nodes (the demo) and 256
    .venv/bin/python bench/benchmarks.py --sizes 64

Each size runs in its own process on a throwaway SQLite database under var/bench/benchmarks-<size>/, loaded with the
demo cluster's shape at that size. One node, two thirds into the set, gets a degraded cable on ens3np0 (link up at
200 Gb/s). The sweep goes through the real path: `services.start_run` (validated), then `execute_run`, whose rounds
are `nccl-tests` jobs whose shards run in this process as a worker would, over the `sim` transport (mpirun answered
by the simulator from every node's state). Cool-down 0 s. Printed: whether the right node, NIC and switch port were
named, rounds against the 2⌈log₂N⌉+1 bound, tests against the N·(N−1)/2 pairs of the exhaustive mode, commands the
simulated nodes answered, wall and CPU time, peak RSS.

Then, on that database, the pages an operator opens over the sweep's result, each requested REQUESTS times after
WARMUP untimed ones through Django's test client in this process as a logged-in operator (the server's time:
middleware, queries, templates, figures; no HTTP server or browser in front): the run list, the run page (suspects,
busbw figure, node × node heatmap, tests), its results fragment (what the page reloads every 2 s while a run is
active), the API's run and results; and the heatmap's figure alone (built and serialised, as the views do). Printed:
p50 / p95 / max wall ms, the median CPU ms of this process per request, queries and KiB of one more request, and
the load average (the machine is shared: other work shows in the wall time, not in the CPU time). Target: p95 <= 300 ms.
"""

import json
import math
import os
import resource
import statistics
import time

from child import demo_cluster_on_sim, each_size, setup_django

REQUESTS, WARMUP = 20, 3
TARGET_P95_MS = 300.0


def measure(size: int) -> dict:
    setup_django()

    from apps.benchmarks import services
    from apps.inventory.demo import compute_hostname
    from apps.inventory.models import Node
    from apps.simulator import services as simulator

    counter = demo_cluster_on_sim(size)
    bad = compute_hostname(size * 2 // 3 + 1)
    simulator.inject_fault(
        node=Node.objects.get(hostname=bad), kind="degraded_cable", target="ens3np0", parameters={"rate_gbps": 200}
    )
    hostnames = ",".join(
        Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname").values_list("hostname", flat=True)
    )

    cpu_started, started = time.process_time(), time.perf_counter()
    run = services.start_run(
        suite="nccl-sweep", targets=services.parse_nodes(hostnames), transport="sim", cooldown_seconds=0, queue=False
    )
    run = services.execute_run(run=run)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    report = services.sweep_report(run)
    suspects = report["suspects"]
    pages = time_pages(run)
    return {
        "size": report["nodes"],
        "bad": bad,
        "named": [f"{s['node']}/{s['nic']}/{s['switch']}:{s['switch_port']}" for s in suspects],
        "right": [s["node"] for s in suspects] == [bad] and suspects[0]["nic"] == "ens3np0",
        "busbw": suspects[0]["busbw_gb_per_s"] if suspects else None,
        "expected": suspects[0]["expected_gb_per_s"] if suspects else None,
        "rounds": report["rounds"],
        "bound": 2 * math.ceil(math.log2(report["nodes"])) + 1,
        "tests": report["tests"],
        "pairs": report["nodes"] * (report["nodes"] - 1) // 2,
        "commands": counter.calls,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "pages": pages,
        "load": os.getloadavg(),
    }


def time_pages(run) -> dict[str, dict]:
    """Server time of the benchmark pages over the finished run, and of its heatmap figure alone."""
    from django.test import Client
    from django.urls import reverse
    from inprocess import time_get

    from apps.accounts.choices import Role
    from apps.accounts.models import User
    from apps.benchmarks import charts

    user, _ = User.objects.get_or_create(username="bench-operator", defaults={"role": Role.OPERATOR})
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    paths = {
        "run list": "/benchmarks/",
        "run page (sweep result)": f"/benchmarks/runs/{run.public_id}/",
        "results fragment (live)": f"/benchmarks/runs/{run.public_id}/live/",
        "API run": f"/api/benchmarks/{run.public_id}/",
        "API results": f"/api/benchmarks/{run.public_id}/results/",
    }
    timed = {}
    for name, path in paths.items():
        result = time_get(client, path, REQUESTS, WARMUP)
        result.pop("response")
        timed[name] = result
    hosts = list(run.nodes.order_by("hostname").values_list("hostname", flat=True))
    tests, suspects = list(run.tests.all()), list(run.suspects.select_related("node"))

    def heatmap():
        return charts.sweep_heatmap(
            hosts, tests, suspects, node_url=lambda node: reverse("node-detail", args=[node.public_id])
        )

    walls, cpus = [], []
    for number in range(WARMUP + REQUESTS):
        started, cpu_started = time.perf_counter(), time.process_time()
        built = heatmap()
        if number >= WARMUP:
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.process_time() - cpu_started) * 1000)
    cuts = statistics.quantiles(walls, n=100, method="inclusive")

    timed["heatmap figure alone"] = {
        "p50": cuts[49],
        "p95": cuts[94],
        "max": max(walls),
        "cpu": statistics.median(cpus),
        "queries": 0,
        "bytes": len(json.dumps(built)),
    }
    return timed


def main() -> None:
    header = (
        f"{'nodes':>6} {'rounds':>6} {'bound':>6} {'tests':>6} {'pairs':>7} {'commands':>9} {'wall s':>7} "
        f"{'CPU s':>7} {'RSS MB':>7}  named (busbw / expected GB/s)"
    )
    for row in each_size(__file__, __doc__, [32, 256], measure, header):
        verdict = "right" if row["right"] else f"WRONG (the cable is on {row['bad']}/ens3np0)"
        print(
            f"{row['size']:>6} {row['rounds']:>6} {row['bound']:>6} {row['tests']:>6} {row['pairs']:>7} "
            f"{row['commands']:>9} {row['wall_s']:>7.1f} {row['cpu_s']:>7.1f} {row['peak_rss_mb']:>7.0f}  "
            f"{', '.join(row['named']) or 'nothing'} ({row['busbw']} / {row['expected']}) {verdict}"
        )
        print_pages(row)


def print_pages(row: dict) -> None:
    load = ", ".join(f"{value:.1f}" for value in row["load"])
    print(
        f"\n  pages over the {row['size']}-node sweep ({REQUESTS} timed requests after {WARMUP}; "
        f"{os.cpu_count()} CPUs, load average {load})"
    )
    target = f"p95 <= {TARGET_P95_MS:.0f} ms"
    print(f"  {'page':<26} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'cpu ms':>7} {'queries':>7} {'KiB':>6}  {target}")
    for name, r in row["pages"].items():
        verdict = "yes" if r["p95"] <= TARGET_P95_MS else "NO"
        print(
            f"  {name:<26} {r['p50']:>7.1f} {r['p95']:>7.1f} {r['max']:>7.1f} {r['cpu']:>7.1f} {r['queries']:>7} "
            f"{r['bytes'] / 1024:>6.0f}  {verdict}"
        )
    print()


if __name__ == "__main__":
    main()
