"""The sweep is a producer: a cable it measures slow is a `link_degraded` event on that cable, with the measured
rate and the run in its evidence; a second sweep finding it again folds into the same event."""

import pytest

from apps.benchmarks import services
from apps.benchmarks.choices import RunStatus
from apps.health.choices import ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Nic
from apps.simulator import services as simulator
from apps.topology.graph import build_cluster_graph

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run_sweep(demo_cluster, shipped_references):
    def call(nodes):
        run = services.start_run(
            suite="nccl-sweep", targets=services.parse_nodes(nodes), transport="sim", queue=False, cooldown_seconds=0
        )
        return services.execute_run(run=run)

    return call


def test_a_cable_the_sweep_measures_slow_is_a_degraded_link_event_cleared_by_a_sweep_that_passes(run_sweep, inject):
    fault = inject("gpu004", "degraded_cable", "ens3np0", rate_gbps=200)

    run = run_sweep("rack:r01")

    assert run.status == RunStatus.SUCCEEDED, run.summary
    nic = Nic.objects.select_related("cable_as_a", "cable_as_b").get(node__hostname="gpu004", name="ens3np0")
    cable = nic.cable_as_a or nic.cable_as_b
    event = HealthEvent.objects.get()
    assert (event.component_type, event.cable, event.nic, event.node.hostname) == (
        ComponentType.CABLE, cable, nic, "gpu004",
    )  # fmt: skip
    assert (event.kind, event.source, event.severity) == ("link_degraded", Source.SWEEP, Severity.MAJOR)
    assert "link at 200 Gb/s (planned 400 Gb/s)" in event.summary
    observed = event.evidence[0]
    assert observed["benchmark_run"] == str(run.public_id)
    assert (observed["measured_gbps"], observed["planned_gbps"]) == (200, 400)
    assert observed["switch"] and observed["switch_port"]
    cable.refresh_from_db()
    assert cable.measured_gbps == 200  # where the topology reads it
    graph = build_cluster_graph()
    [link] = [
        c for _, _, data in graph.graph.edges(data=True) for c in data["cables"] if c.cable_id == str(cable.public_id)
    ]
    assert link.speed_gbps == 200

    again = run_sweep("rack:r01")

    event.refresh_from_db()
    assert HealthEvent.objects.count() == 1 and event.count == 2
    assert event.evidence[-1]["benchmark_run"] == str(again.public_id)

    # The cable replaced (the fault cleared): the next sweep passes gpu004, which clears the event as its validation.
    simulator.clear_fault(fault=fault)
    passed = run_sweep("rack:r01")

    event.refresh_from_db()
    assert not event.is_open and event.cleared_by == "validation"
    assert event.clear_evidence == {"benchmark_run": str(passed.public_id), "suite": "nccl-sweep"}
    assert "gpu004" in event.clear_reason
    cable.refresh_from_db()
    assert cable.measured_gbps is None


def test_a_healthy_sweep_records_nothing(run_sweep):
    run_sweep("rack:r01")

    assert not HealthEvent.objects.exists()
