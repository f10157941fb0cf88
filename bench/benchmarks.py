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

After the sizes, always once: the tray case. The demo with its GB200 NVL72 rack (nvl01: one NVLink domain, 18 compute
trays of 4 GPUs) on a database of its own (var/bench/benchmarks-tray/); one tray, two thirds into the domain
(nvl01-t12), gets `tray_nvlink_degraded` (every GPU of the tray loses 4 of its 18 NVLink links: its cable cartridge
or connectors), and the same sweep runs over the domain's 18 trays (NCCL over MNNVL between them). Printed as a row
like the others: rounds against 2⌈log₂18⌉+1 = 11, tests, and whether exactly that tray was named, as the compute
tray to isolate (apps/benchmarks/trays.py). No pages: the sizes' rows time those.
"""

import gc
import json
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from child import demo_cluster_on_sim, each_size, run_on_fresh_sqlite, setup_django

REQUESTS, WARMUP = 20, 3
TARGET_P95_MS = 300.0
TRAY_DOMAIN = "nvl01"  # the demo's GB200 NVL72 rack: its NVLink domain's 18 compute trays
TRAY_SLOT = 12  # the degraded tray, two thirds into the domain as the cable is into the nodes
TRAY_LINKS_DOWN = 4  # of each of its GPUs' 18 NVLink links (the tray_nvlink_degraded fault's default)


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
    hostnames = (
        Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname").values_list("hostname", flat=True)
    )
    run, swept = sweep(list(hostnames), counter)
    suspects = services.sweep_report(run)["suspects"]
    return {
        **swept,
        "bad": bad,
        "named": [f"{s['node']}/{s['nic']}/{s['switch']}:{s['switch_port']}" for s in suspects],
        "right": [s["node"] for s in suspects] == [bad] and suspects[0]["nic"] == "ens3np0",
        "pages": time_pages(run),
        "load": os.getloadavg(),
    }


def measure_tray() -> dict:
    """The tray case: a sweep over the compute trays of the demo's NVL72 domain, one of them with degraded NVLink."""
    setup_django()

    from apps.inventory.demo import tray_hostname
    from apps.inventory.models import Node
    from apps.simulator import services as simulator

    counter = demo_cluster_on_sim(32, rack_scale_racks=1)
    bad = tray_hostname(1, TRAY_SLOT)
    simulator.inject_fault(
        node=Node.objects.get(hostname=bad), kind="tray_nvlink_degraded", parameters={"links": TRAY_LINKS_DOWN}
    )
    trays = (
        Node.objects.filter(nvlink_domain__name=TRAY_DOMAIN).order_by("tray_slot").values_list("hostname", flat=True)
    )
    run, swept = sweep(list(trays), counter)
    suspects = list(run.suspects.select_related("node"))
    where = [suspect.evidence.get("tray", {}) for suspect in suspects]
    return {
        **swept,
        "bad": bad,
        "named": [f"{tray.get('compute_tray')} ({tray.get('isolate')}, slot {tray.get('slot')})" for tray in where],
        "right": [s.node.hostname for s in suspects] == [bad] and where[0].get("isolate") == "compute tray",
        "load": os.getloadavg(),
    }


def sweep(hostnames: list[str], counter) -> tuple:
    """The nccl-sweep over the nodes through the real path, timed; the run and the row's figures."""
    from apps.benchmarks import services

    cpu_started, started = time.process_time(), time.perf_counter()
    run = services.start_run(
        suite="nccl-sweep",
        targets=services.parse_nodes(",".join(hostnames)),
        transport="sim",
        cooldown_seconds=0,
        queue=False,
    )
    run = services.execute_run(run=run)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    report = services.sweep_report(run)
    suspects = report["suspects"]
    return run, {
        "size": report["nodes"],
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
    }


def time_pages(run) -> dict[str, dict]:
    """Server time of the benchmark pages over the finished run, and of its heatmap figure alone."""
    from django.test import Client
    from django.urls import reverse
    from inprocess import time_get

    from apps.accounts.choices import Role
    from apps.accounts.models import User
    from apps.benchmarks import charts
    from portal.serving import start_serving

    user, _ = User.objects.get_or_create(username="bench-operator", defaults={"role": Role.OPERATOR})
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    # Set up as portal/asgi.py sets up the server process: what the sweep left in this process is frozen out of the
    # garbage collector's full passes (a server has no sweep's heap; at 2,048 nodes a full pass over it added
    # ~190-220 ms to one API request in twenty).
    gc.collect()
    start_serving()
    paths = {
        "run list": "/benchmarks/",
        "run page (sweep result)": f"/benchmarks/runs/{run.public_id}/",
        "results fragment (live)": f"/benchmarks/runs/{run.public_id}/live/",
        "API run": f"/api/benchmarks/{run.public_id}/",
        "API results": f"/api/benchmarks/{run.public_id}/results/",
    }
    # A finished run's results fragment answers htmx's 286 (stop polling) with the same content.
    statuses = {"results fragment (live)": (200, 286)}
    timed = {}
    for name, path in paths.items():
        result = time_get(client, path, REQUESTS, WARMUP, statuses.get(name, (200,)))
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
    if sys.argv[1:] == ["--child", "tray"]:  # the tray case's child
        print(json.dumps(measure_tray()))
        return
    parent = "--child" not in sys.argv  # each_size ran the child of a size instead
    header = (
        f"{'nodes':>6} {'rounds':>6} {'bound':>6} {'tests':>6} {'pairs':>7} {'commands':>9} {'wall s':>7} "
        f"{'CPU s':>7} {'RSS MB':>7}  named (busbw / expected GB/s)"
    )
    for row in each_size(__file__, __doc__, [32, 256], measure, header):
        print_row(row, f"WRONG (the cable is on {row['bad']}/ens3np0)")
        print_pages(row)
    if parent:
        row = run_on_fresh_sqlite(__file__, f"{Path(__file__).stem}-tray", ["tray"])
        print(
            f"one bad tray in NVLink domain {TRAY_DOMAIN} ({row['size']} GB200 compute trays; {row['bad']}: every GPU "
            f"lost {TRAY_LINKS_DOWN} of its 18 NVLink links; load average {row['load'][0]:.1f})"
        )
        print(header.replace(" nodes", " trays"))
        print_row(row, f"WRONG (the degraded tray is {row['bad']})")


def print_row(row: dict, wrong: str) -> None:
    verdict = "right" if row["right"] else wrong
    print(
        f"{row['size']:>6} {row['rounds']:>6} {row['bound']:>6} {row['tests']:>6} {row['pairs']:>7} "
        f"{row['commands']:>9} {row['wall_s']:>7.1f} {row['cpu_s']:>7.1f} {row['peak_rss_mb']:>7.0f}  "
        f"{', '.join(row['named']) or 'nothing'} ({row['busbw']} / {row['expected']}) {verdict}"
    )


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
