"""Time a discovery of the simulated cluster: every compute node's facts read, parsed and reconciled.

    .venv/bin/python bench/discover.py                  # 32 and 256 compute nodes
    .venv/bin/python bench/discover.py --sizes 32 512

Each size runs in its own process on a throwaway SQLite database under var/bench/discover-<size>/, loaded with the
demo cluster's shape at that size, with faults injected on every eighth node (an MTU of 1500 on a data NIC, a NIC
link down, a GPU off the bus) so that the reconcile step has differences to record. The run goes through the real
path: start_discovery (a `discover` job over the `sim` transport), the job's shards run in this process as a
worker would, and each shard's results are parsed and reconciled with the inventory. Prints wall time, commands the
simulated nodes answered, CPU per command and per node, differences recorded and the peak RSS. There is no peer
tool to compare with on the same simulated nodes; the figures say what one worker process does per node.
"""

import resource
import time

from child import demo_cluster_on_sim, each_size, run_shards_here, setup_django

FAULTS = (("mtu", "ens1np0"), ("nic_down", "ens2np0"), ("xid79", "3"))


def measure(size: int) -> dict:
    """Runs inside the child process: Django set up on this size's own database."""
    setup_django()

    from apps.discovery import services
    from apps.discovery.models import Difference
    from apps.inventory.models import Node
    from apps.jobs import services as job_services
    from apps.jobs.models import JobEvent
    from apps.simulator.services import inject_fault

    counter = demo_cluster_on_sim(size)
    nodes = list(Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname"))
    for number, node in enumerate(nodes[::8]):
        kind, target = FAULTS[number % len(FAULTS)]
        inject_fault(node=node, kind=kind, target=target)

    cpu_started, started = time.process_time(), time.perf_counter()
    job = services.start_discovery(
        targets=job_services.TargetSpec(nodes=tuple(node.hostname for node in nodes)), transport="sim"
    )
    run_shards_here(job)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    job.refresh_from_db()
    return {
        "size": len(nodes),
        "run_s": wall,
        "cpu_s": cpu,
        "cells": job.steps.count(),
        "commands": counter.calls,
        "events": JobEvent.objects.filter(job=job).count(),
        "differences": Difference.objects.filter(job=job).count(),
        "status": job.status,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    header = (
        f"{'nodes':>6} {'run s':>7} {'CPU s':>7} {'cells':>6} {'commands':>9} {'CPU ms/cmd':>10} "
        f"{'CPU ms/node':>11} {'events':>8} {'diffs':>6} {'RSS MB':>7}  status"
    )
    for row in each_size(__file__, __doc__, [32, 256], measure, header):
        print(
            f"{row['size']:>6} {row['run_s']:>7.1f} {row['cpu_s']:>7.1f} {row['cells']:>6} {row['commands']:>9} "
            f"{1000 * row['cpu_s'] / row['commands']:>10.2f} {1000 * row['cpu_s'] / row['size']:>11.1f} "
            f"{row['events']:>8} {row['differences']:>6} {row['peak_rss_mb']:>7.0f}  {row['status']}"
        )


if __name__ == "__main__":
    main()
