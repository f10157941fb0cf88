"""HPL-MxP, nvbandwidth and a 15-minute burn-in on the simulated demo cluster, three nodes with a fault each:
which nodes each suite calls bad, figures stored, wall time, CPU and peak RSS.

    .venv/bin/python bench/node_suites.py                 # 32 compute nodes (the demo)
    .venv/bin/python bench/node_suites.py --sizes 64 256

Each size runs in its own process on a throwaway SQLite database under var/bench/node_suites-<size>/. Faults: the
first node's GPUs capped at 450 W (power_cap), the middle node's GPU 2 with NVLink 5 down, the last node's GPU 0
overheating after 600 s under load (late_thermal). Each suite goes through the real path (`services.start_run`, then
`execute_run`, its rounds `node-benchmark` jobs whose shards run here over the `sim` transport). Printed per suite:
the nodes with a figure below pass (expected: the faulted nodes the suite can see), figures stored, commands the
simulated nodes answered, wall and CPU time. On real hardware the time is the tools' own (HPL-MxP minutes per node,
nvbandwidth about a minute, the soak its duration); here it is the portal's and the simulator's.
"""

import resource
import time

from child import demo_cluster_on_sim, each_size, setup_django

SUITES = (("hpl-mxp", {}), ("nvbandwidth", {}), ("burn-in", {"duration_seconds": 900}))


def measure(size: int) -> dict:
    setup_django()

    from apps.benchmarks import services
    from apps.benchmarks.choices import Verdict
    from apps.inventory.demo import compute_hostname
    from apps.inventory.models import Node
    from apps.simulator import services as simulator

    counter = demo_cluster_on_sim(size)
    capped, linked, hot = compute_hostname(1), compute_hostname(size // 2), compute_hostname(size)
    for hostname, kind, target, parameters in (
        (capped, "power_cap", "", {"watts": 450}),
        (linked, "nvlink_down", "2", {"link": 5}),
        (hot, "late_thermal", "0", {"after_s": 600}),
    ):
        simulator.inject_fault(
            node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters
        )
    hostnames = ",".join(
        Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname").values_list("hostname", flat=True)
    )
    rows = []
    for suite, options in SUITES:
        commands, cpu_started, started = counter.calls, time.process_time(), time.perf_counter()
        run = services.start_run(
            suite=suite, targets=services.parse_nodes(hostnames), transport="sim", queue=False, **options
        )
        run = services.execute_run(run=run)
        bad = sorted(
            {
                "+".join(item.hosts) if len(item.hosts) == 1 else f"across {len(item.hosts)}"
                for item in run.measurements.exclude(verdict=Verdict.PASS)
            }
        )
        rows.append(
            {
                "suite": suite,
                "status": run.status,
                "bad": bad,
                "figures": run.measurements.count(),
                "commands": counter.calls - commands,
                "wall_s": time.perf_counter() - started,
                "cpu_s": time.process_time() - cpu_started,
            }
        )
    return {
        "size": size,
        "faults": {"power_cap": capped, "nvlink_down": linked, "late_thermal": hot},
        "rows": rows,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    header = (
        f"{'nodes':>6} {'suite':<12} {'status':<10} {'figures':>7} {'commands':>9} {'wall s':>7} {'CPU s':>7}  "
        "below pass"
    )
    for result in each_size(__file__, __doc__, [32], measure, header):
        for row in result["rows"]:
            print(
                f"{result['size']:>6} {row['suite']:<12} {row['status']:<10} {row['figures']:>7} {row['commands']:>9} "
                f"{row['wall_s']:>7.1f} {row['cpu_s']:>7.1f}  {', '.join(row['bad']) or 'none'}"
            )
        faults = ", ".join(f"{kind} on {host}" for kind, host in result["faults"].items())
        print(f"{'':>6} faults: {faults}; peak RSS {result['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
