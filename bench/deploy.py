"""Time a whole deployment plan on the simulated cluster: every compute node through all four phases.

    .venv/bin/python bench/deploy.py                  # 8 and 32 compute nodes (the demo's shape)
    .venv/bin/python bench/deploy.py --sizes 32 64

Each size runs in its own process on a throwaway SQLite database under var/bench/deploy-<size>/, loaded with the
demo cluster's shape at that size (no faults; from 17 nodes on, the demo's gpu017 runs a BIOS one version behind,
so its firmware cell fails until a flash is approved, as it should). The run goes through the real path: create the plan
(options, criteria, artefacts validated), approve, start (a `deploy` job), then the job's shards run in this
process as a worker would, over the `sim` transport. Prints wall time, commands the simulated nodes answered,
events written, verdicts stored and the peak RSS. There is no peer tool to compare with (BCM and AWX do not run
this plan); the figures say what one worker process does per node.
"""

import resource
import time

from child import demo_cluster_on_sim, each_size, run_shards_here, setup_django


def measure(size: int) -> dict:
    """Runs inside the child process: Django set up on this size's own database."""
    setup_django()

    from apps.accounts.choices import Role
    from apps.accounts.models import User
    from apps.deployments import services
    from apps.deployments.models import Verdict
    from apps.inventory.models import Node
    from apps.jobs import services as job_services
    from apps.jobs.models import JobEvent

    counter = demo_cluster_on_sim(size)
    user = User.objects.create(username="bench", role=Role.OPERATOR)
    hostnames = tuple(Node.objects.filter(gpus__isnull=False).distinct().values_list("hostname", flat=True))

    started = time.perf_counter()
    deployment = services.create_deployment(
        name=f"bench-{size}", targets=job_services.TargetSpec(nodes=hostnames), user=user, transport="sim"
    )
    services.approve(deployment=deployment, user=user)
    run = services.start(deployment=deployment, user=user)
    planned = time.perf_counter() - started

    cpu_started, started = time.process_time(), time.perf_counter()
    run_shards_here(run.job)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    deployment.refresh_from_db()
    return {
        "size": len(hostnames),
        "plan_s": planned,
        "run_s": wall,
        "cpu_s": cpu,
        "cells": run.job.steps.count(),
        "commands": counter.calls,
        "events": JobEvent.objects.filter(job=run.job).count(),
        "verdicts": Verdict.objects.filter(run=run).count(),
        "state": deployment.state,
        "failed_cells": sorted(
            f"{cell.hostname}/{cell.step}" for cell in run.job.steps.filter(status__in=["failed", "error"])
        ),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    header = (
        f"{'nodes':>6} {'plan s':>7} {'run s':>7} {'CPU s':>7} {'cells':>6} {'commands':>9} {'cmd/s':>7} "
        f"{'CPU ms/cmd':>10} {'events':>8} {'verdicts':>9} {'RSS MB':>7}  state"
    )
    for row in each_size(__file__, __doc__, [8, 32], measure, header):
        print(
            f"{row['size']:>6} {row['plan_s']:>7.2f} {row['run_s']:>7.1f} {row['cpu_s']:>7.1f} {row['cells']:>6} "
            f"{row['commands']:>9} {row['commands'] / row['run_s']:>7.0f} "
            f"{1000 * row['cpu_s'] / row['commands']:>10.2f} {row['events']:>8} {row['verdicts']:>9} "
            f"{row['peak_rss_mb']:>7.0f}  {row['state']}"
            + (f" ({', '.join(row['failed_cells'])} failed)" if row["failed_cells"] else "")
        )


if __name__ == "__main__":
    main()
