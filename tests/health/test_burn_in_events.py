"""A burn-in is a producer and a validation: a node that fails it is a `burn_in_failed` event; once its GPU's fault
is cleared in the simulator, a burn-in that passes clears the node's open GPU events (the XID the watch recorded) and
its `burn_in_failed`."""

import pytest

from apps.benchmarks import services
from apps.benchmarks.choices import RunStatus
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Gpu, Node
from apps.simulator import services as simulator

pytestmark = pytest.mark.django_db(transaction=True)


def burn_in(nodes):
    run = services.start_run(
        suite="burn-in", targets=services.parse_nodes(nodes), transport="sim", queue=False, duration_seconds=60
    )
    return services.execute_run(run=run)


def test_a_failed_burn_in_is_an_event_and_a_passed_one_after_the_repair_clears_the_gpu_events(
    demo_cluster, shipped_references
):
    node = Node.objects.get(hostname="gpu001")
    fault = simulator.inject_fault(node=node, kind="xid79", target="7", parameters={})
    xid = health.record_event(
        component=Gpu.objects.get(node=node, index=7), source=Source.TELEMETRY, kind="xid79",
        severity=Severity.CRITICAL, summary="GPU 7: XID 79, GPU has fallen off the bus",
    )  # fmt: skip

    failed = burn_in("gpu001,gpu002")

    assert failed.status == RunStatus.SUCCEEDED, failed.summary
    event = HealthEvent.objects.get(kind="burn_in_failed")
    assert (event.node, event.source, event.component_type) == (node, Source.BENCHMARK, "node")
    assert event.evidence[0]["benchmark_run"] == str(failed.public_id)
    assert any("7 of the 8 GPUs" in line for line in event.evidence[0]["lines"])
    xid.refresh_from_db()
    assert xid.is_open  # a failed burn-in validates nothing
    assert not HealthEvent.objects.filter(node__hostname="gpu002").exists()

    simulator.clear_fault(fault=fault)  # the node power-cycled, the GPU back on the bus
    passed = burn_in("gpu001")

    xid.refresh_from_db()
    assert not xid.is_open and xid.cleared_by == "validation"
    assert xid.clear_evidence["benchmark_run"] == str(passed.public_id)
    assert "burn-in (gpu-burn) passed on gpu001" in xid.clear_reason
    event.refresh_from_db()  # the node's own failure too: a repair's gate that failed, then passed, leaves none open
    assert not event.is_open and event.clear_evidence["benchmark_run"] == str(passed.public_id)
