"""Fixtures for the benchmark tests: the demo cluster on the simulator, and a sweep run in this process."""

import pytest

from apps.benchmarks import services
from apps.inventory.models import Node
from apps.simulator import services as simulator


@pytest.fixture(autouse=True)
def fast_jobs(settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS = 0.1
    return settings


@pytest.fixture
def inject(demo_cluster):
    def call(hostname, kind, target="", **parameters):
        return simulator.inject_fault(
            node=Node.objects.get(hostname=hostname), kind=kind, target=target, parameters=parameters
        )

    return call


@pytest.fixture(autouse=True)
def references(shipped_references):
    return shipped_references


@pytest.fixture
def run_suite(demo_cluster):
    """run_suite(suite, nodes, **options) -> the finished BenchmarkRun, run here over the sim transport."""

    def call(suite, nodes, **options):
        options.setdefault("cooldown_seconds", 0)
        run = services.start_run(
            suite=suite, targets=services.parse_nodes(nodes), transport="sim", queue=False, **options
        )
        return services.execute_run(run=run)

    return call
