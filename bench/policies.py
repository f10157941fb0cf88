"""How long do a low-load power policy's dry run and its SLO guard take on the demo cluster (32 GPU nodes, 256 GPUs,
the demo workloads), reading the simulator's telemetry as the embedded wiring does? Beat (or the embedded loop) runs
an evaluation every RACKPILOT_POLICY_EVALUATION_SECONDS, so it must stay well below that.

    .venv/bin/python bench/policies.py [--runs 3]

A throwaway SQLite database under var/bench/ (removed at the end). Prints the median of the runs per figure.
"""

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATABASE = ROOT / "var" / "bench" / "policies.sqlite3"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    DATABASE.parent.mkdir(parents=True, exist_ok=True)
    DATABASE.unlink(missing_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{DATABASE}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.pop("RACKPILOT_PROMETHEUS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from apps.costs import services as policies
    from apps.costs.models import CostPolicy
    from apps.inventory.demo import DEMO, load_cluster
    from apps.monitoring.models import Slo
    from apps.monitoring.telemetry import SimulatorTelemetry
    from apps.workloads.demo import load_workloads
    from apps.workloads.models import InferenceService, TrainingJob

    try:
        call_command("migrate", verbosity=0)
        load_cluster(DEMO)
        load_workloads()
        service = InferenceService.objects.get()
        a_day_ago = service.created - dt.timedelta(days=1)  # the workloads have been running for a day
        InferenceService.objects.update(created=a_day_ago)
        TrainingJob.objects.update(created=a_day_ago, started_at=a_day_ago)
        Slo.objects.create(name="chat-p99", objective="latency_p99", scope="service", service=service, target=100)
        policy = CostPolicy.objects.create(
            name="bench",
            kind="low_load_power",
            scope="cluster",
            parameters={"utilisation_below": 75, "restore_above": 100, "window_minutes": 30, "power_limit_w": 450},
        )
        figures: dict[str, list[float]] = {"dry run (256 GPUs, 30 min window)": [], "latency SLO guard": []}
        for _ in range(args.runs):
            start = time.perf_counter()
            action = policies.dry_run(policy=policy)
            figures["dry run (256 GPUs, 30 min window)"].append(time.perf_counter() - start)
            start = time.perf_counter()
            trouble = policies.latency_trouble(source=SimulatorTelemetry(), hostnames=action.hostnames)
            figures["latency SLO guard"].append(time.perf_counter() - start)
        print(f"proposal: {action.reason}; {action.expected_kwh_per_day:.1f} kWh/day; guard: {trouble or 'headroom'}")
        for name, values in figures.items():
            print(f"{name}: median {statistics.median(values):.2f} s over {len(values)} runs")
    finally:
        DATABASE.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
