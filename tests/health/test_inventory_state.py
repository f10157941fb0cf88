"""The inventory reads the one health state: a GPU's health and a node's health state are written from the open
events whenever one is recorded, worsens or is cleared, and discovery's presence does not mask an open event."""

import importlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps

from apps.discovery.choices import ObjectType
from apps.discovery.reconcile import apply
from apps.health import services
from apps.health.choices import ClearedBy, NodeState, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import GpuHealth, GpuPresence, NodeStatus
from apps.inventory.models import Gpu, Node
from apps.monitoring.health import node_health as fleet_node_health
from tests.factories import make_gpu, make_nic, make_node

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def seen(*pairs):
    return [SimpleNamespace(kind=kind, severity=severity) for kind, severity in pairs]


@pytest.mark.parametrize(
    ("presence", "events", "health"),
    [
        (GpuPresence.PRESENT, [], GpuHealth.HEALTHY),
        (GpuPresence.UNKNOWN, [], GpuHealth.UNKNOWN),
        (GpuPresence.MISSING, [], GpuHealth.MISSING),
        (GpuPresence.PRESENT, seen(("xid79", Severity.CRITICAL)), GpuHealth.FAILED),
        (GpuPresence.PRESENT, seen(("row_remap_pending", Severity.MAJOR)), GpuHealth.FAILED),
        (GpuPresence.PRESENT, seen(("pcie_downtrained", Severity.MINOR)), GpuHealth.WARNING),
        (GpuPresence.PRESENT, seen(("note", Severity.INFO)), GpuHealth.HEALTHY),
        (GpuPresence.UNKNOWN, seen(("xid13", Severity.MINOR)), GpuHealth.WARNING),
        (GpuPresence.PRESENT, seen(("xid13", Severity.MINOR), ("xid48", Severity.MAJOR)), GpuHealth.FAILED),
        (GpuPresence.PRESENT, seen(("gpu_missing", Severity.CRITICAL)), GpuHealth.MISSING),
        (GpuPresence.MISSING, seen(("xid79", Severity.CRITICAL)), GpuHealth.MISSING),
    ],
)
def test_the_one_mapping_from_presence_and_open_events_to_gpu_health(presence, events, health):
    assert services.gpu_health_of(presence=presence, events=events) == health


def present_gpu(**fields) -> Gpu:
    return make_gpu(presence=GpuPresence.PRESENT, **fields)


def record(component, kind="xid79", severity=Severity.CRITICAL, at=T0):
    return services.record_event(
        component=component,
        source=Source.TELEMETRY,
        kind=kind,
        severity=severity,
        summary=f"{kind} on {component}",
        at=at,
    )


def states(gpu: Gpu) -> tuple[str, str]:
    gpu = Gpu.objects.select_related("node").get(pk=gpu.pk)
    return gpu.health, gpu.node.health_state


@pytest.mark.django_db
def test_recording_worsening_and_clearing_write_the_gpu_and_its_node():
    gpu = present_gpu(index=3)
    assert states(gpu) == (GpuHealth.HEALTHY, NodeState.HEALTHY)

    record(gpu, kind="xid13", severity=Severity.MINOR)
    assert states(gpu) == (GpuHealth.WARNING, NodeState.DEGRADED)
    event = record(gpu, kind="xid13", severity=Severity.MAJOR, at=T0 + timedelta(minutes=1))  # a worse repeat
    assert states(gpu) == (GpuHealth.FAILED, NodeState.UNHEALTHY)

    services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="application fault, job fixed")
    assert states(gpu) == (GpuHealth.HEALTHY, NodeState.HEALTHY)


@pytest.mark.django_db
def test_a_node_takes_the_state_of_its_parts_events_and_its_other_gpus_stay_healthy():
    node = make_node()
    gpu, other = present_gpu(node=node, index=0), present_gpu(node=node, index=1)
    record(make_nic(node=node), kind="link_errors", severity=Severity.MINOR)
    assert states(gpu) == (GpuHealth.HEALTHY, NodeState.DEGRADED)
    record(node, kind="bmc_watchdog", severity=Severity.MAJOR)
    assert states(other) == (GpuHealth.HEALTHY, NodeState.UNHEALTHY)
    record(gpu, kind="note", severity=Severity.INFO)
    assert Gpu.objects.get(pk=gpu.pk).health == GpuHealth.HEALTHY


@pytest.mark.django_db
def test_a_validation_clearing_in_bulk_brings_both_back():
    node = make_node()
    gpus = [present_gpu(node=node, index=index) for index in range(3)]
    for gpu in gpus:
        record(gpu, kind="ecc_uncorrectable")
    assert {states(gpu) for gpu in gpus} == {(GpuHealth.FAILED, NodeState.UNHEALTHY)}

    cleared = services.clear_validated(node=node, validation={"run": "burn-in"}, reason="burn-in passed")
    assert len(cleared) == 3
    assert {states(gpu) for gpu in gpus} == {(GpuHealth.HEALTHY, NodeState.HEALTHY)}


@pytest.mark.django_db
def test_an_open_gpu_missing_makes_it_missing():
    gpu = present_gpu()
    record(gpu, kind="gpu_missing")
    assert states(gpu) == (GpuHealth.MISSING, NodeState.UNHEALTHY)


@pytest.mark.django_db
def test_discovery_says_presence_and_does_not_mask_an_open_event():
    gpu = present_gpu(index=3)
    event = record(gpu)

    apply(gpu.node, ObjectType.GPU, "GPU3", "present", "present")  # discovery found it: an XID still stands
    assert states(gpu) == (GpuHealth.FAILED, NodeState.UNHEALTHY)
    apply(gpu.node, ObjectType.GPU, "GPU3", "present", "missing")
    assert Gpu.objects.get(pk=gpu.pk).presence == GpuPresence.MISSING
    assert states(gpu)[0] == GpuHealth.MISSING
    apply(gpu.node, ObjectType.GPU, "GPU3", "present", "present")
    assert states(gpu)[0] == GpuHealth.FAILED

    services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="reseated")
    assert states(gpu) == (GpuHealth.HEALTHY, NodeState.HEALTHY)


@pytest.mark.django_db
def test_a_gpu_added_present_is_healthy_and_one_not_yet_seen_unknown():
    assert make_gpu().health == GpuHealth.UNKNOWN
    assert Gpu.objects.get(pk=present_gpu().pk).health == GpuHealth.HEALTHY


@pytest.mark.django_db
def test_fleet_health_judges_a_gpu_by_its_events_once():
    node = make_node(status=NodeStatus.READY)
    gpu = present_gpu(node=node, index=2)
    record(gpu, kind="pcie_downtrained", severity=Severity.MINOR)

    [judged] = fleet_node_health(with_telemetry=False, hostname=node.hostname)
    # A minor event degrades the node; the GPU's stored "warning" does not fail it a second time.
    assert (judged.healthy, judged.state, len(judged.reasons)) == (True, NodeState.DEGRADED, 1)


@pytest.mark.django_db
def test_the_backfill_writes_what_open_events_say_and_keeps_a_hand_marked_gpu_as_an_event():
    node = make_node()
    stale, marked, fine = (present_gpu(node=node, index=index) for index in range(3))
    record(stale)
    Gpu.objects.filter(pk=stale.pk).update(health=GpuHealth.HEALTHY)  # as before this change: events not applied
    Node.objects.filter(pk=node.pk).update(health_state=NodeState.HEALTHY)
    Gpu.objects.filter(pk=marked.pk).update(health=GpuHealth.FAILED)  # someone marked it by hand, no event

    migration = importlib.import_module("apps.health.migrations.0004_inventory_health_from_events")
    migration.record_from_open_events(django_apps, None)

    assert states(stale) == (GpuHealth.FAILED, NodeState.UNHEALTHY)
    assert states(marked)[0] == GpuHealth.FAILED
    kept = HealthEvent.objects.get(gpu=marked)
    assert (kept.kind, kept.severity, kept.source, kept.is_open) == ("marked_in_inventory", "major", "operator", True)
    assert states(fine)[0] == GpuHealth.HEALTHY
