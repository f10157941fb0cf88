"""The NCCL sweep on the simulated demo cluster with one degraded cable: rounds and tests to isolate it, wall time, CPU.

    .venv/bin/python bench/benchmarks.py                 # 32 compute nodes (the demo) and 256
    .venv/bin/python bench/benchmarks.py --sizes 64

Each size runs in its own process on a throwaway SQLite database under var/bench/benchmarks-<size>/, loaded with the
demo cluster's shape at that size. One node, two thirds into the set, gets a degraded cable on ens3np0 (link up at
200 Gb/s). The sweep goes through the real path: `services.start_run` (validated), then `execute_run`, whose rounds
are `nccl-tests` jobs whose shards run in this process as a worker would, over the `sim` transport (mpirun answered
by the simulator from every node's state). Cool-down 0 s. Printed: whether the right node, NIC and switch port were
named, rounds against the 2⌈log₂N⌉+1 bound, tests against the N·(N−1)/2 pairs of the exhaustive mode, commands the
simulated nodes answered, wall and CPU time, peak RSS.
"""

import math
import resource
import time

from child import demo_cluster_on_sim, each_size, setup_django


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
    return {
        "size": report["nodes"],
        "bad": bad,
        "named": [f"{s['node']}/{s['nic']}/{s['switch']}:{s['switch_port']}" for s in suspects],
        "right": [s["node"] for s in suspects] == [bad] and suspects[0]["nic"] == "ens3np0",
        "busbw": suspects[0]["busbw_gbps"] if suspects else None,
        "expected": suspects[0]["expected_gbps"] if suspects else None,
        "rounds": report["rounds"],
        "bound": 2 * math.ceil(math.log2(report["nodes"])) + 1,
        "tests": report["tests"],
        "pairs": report["nodes"] * (report["nodes"] - 1) // 2,
        "commands": counter.calls,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


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


if __name__ == "__main__":
    main()
