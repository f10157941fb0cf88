"""Health events: repeats fold into one open event per component and kind, clearing needs a reason and is audited,
and a node's state follows its open events."""

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.health import services
from apps.health.choices import ClearedBy, ComponentType, NodeState, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Cable
from tests.factories import make_gpu, make_nic, make_node, make_switch, make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def xid(gpu, *, at=T0, severity=Severity.CRITICAL, evidence=None):
    return services.record_event(
        component=gpu,
        source=Source.TELEMETRY,
        kind="xid79",
        severity=severity,
        summary=f"GPU {gpu.index}: XID 79, fell off the bus",
        evidence=evidence if evidence is not None else {"xid": 79},
        at=at,
    )


def test_a_repeat_folds_into_the_open_event_and_keeps_the_worse_severity():
    gpu = make_gpu(index=3)
    first = xid(gpu, severity=Severity.MAJOR, evidence={"job": "a"})
    again = xid(gpu, at=T0 + timedelta(minutes=5), severity=Severity.CRITICAL, evidence={"job": "b"})
    later = xid(gpu, at=T0 + timedelta(minutes=9), severity=Severity.MINOR, evidence={"job": "c"})

    assert first.pk == again.pk == later.pk
    assert HealthEvent.objects.count() == 1
    assert (later.count, later.severity) == (3, Severity.CRITICAL)
    assert (later.first_seen, later.last_seen) == (T0, T0 + timedelta(minutes=9))
    assert [item["job"] for item in later.evidence] == ["a", "b", "c"]
    assert (later.component_type, later.node, later.gpu) == (ComponentType.GPU, gpu.node, gpu)


def test_the_same_observation_twice_is_counted_once_but_moves_last_seen():
    gpu = make_gpu()
    xid(gpu)
    event = xid(gpu, at=T0 + timedelta(minutes=1))

    assert event.count == 1 and len(event.evidence) == 1
    assert event.last_seen == T0 + timedelta(minutes=1)


def test_other_kinds_and_other_components_are_other_events():
    gpu, other = make_gpu(index=0), make_gpu(index=1)
    xid(gpu)
    xid(other)
    services.record_event(
        component=gpu, source=Source.TELEMETRY, kind="ecc_uncorrectable", severity=Severity.MAJOR,
        summary="GPU 0: 2 uncorrectable ECC errors", at=T0,
    )  # fmt: skip

    assert HealthEvent.objects.count() == 3


def test_a_fault_back_after_its_clear_opens_a_new_event():
    gpu = make_gpu()
    first = xid(gpu)
    services.clear_event(event=first, by=ClearedBy.OPERATOR, reason="GPU reseated", at=T0 + timedelta(hours=1))
    second = xid(gpu, at=T0 + timedelta(hours=2))

    assert second.pk != first.pk and second.is_open and second.count == 1
    assert list(services.open_events()) == [second]


def test_clearing_is_audited_with_its_reason_and_a_fold_is_not():
    operator = make_user(role="operator")
    gpu = make_gpu()
    event = xid(gpu)
    xid(gpu, at=T0 + timedelta(minutes=1), evidence={"xid": 79, "job": "x"})

    services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="replaced the GPU", user=operator, at=T0)

    entries = list(AuditEntry.objects.for_object(event).order_by("id"))
    assert [entry.action for entry in entries] == ["create", "clear"]  # "Cleared", not "Updated"
    assert entries[1].changes["clear_reason"] == ["", "replaced the GPU"]
    assert entries[1].changes["cleared_by_user_id"] == [None, operator.pk]


def test_a_clear_without_a_reason_or_twice_is_refused_and_changes_nothing():
    event = xid(make_gpu())
    with pytest.raises(serializers.ValidationError) as refused:
        services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="  ")
    assert "reason" in refused.value.detail
    event.refresh_from_db()
    assert event.is_open

    services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="fixed", at=T0)
    with pytest.raises(serializers.ValidationError) as twice:
        services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="fixed again")
    assert "event" in twice.value.detail


def test_bad_input_names_each_field():
    with pytest.raises(serializers.ValidationError) as refused:
        services.record_event(component=make_node(), source="gossip", kind="Bad Kind!", severity="dire", summary="")
    assert set(refused.value.detail) == {"source", "kind", "severity", "summary"}
    assert not HealthEvent.objects.exists()


def test_a_node_state_follows_its_worst_open_event():
    node = make_node()
    assert services.node_health(node).state == NodeState.HEALTHY

    services.record_event(
        component=node,
        source=Source.TRIAGE,
        kind="nccl_timeout",
        severity=Severity.MINOR,
        summary="NCCL timeout",
        at=T0,
    )
    assert services.node_health(node).state == NodeState.DEGRADED

    event = xid(make_gpu(node=node))
    health = services.node_health(node)
    assert health.state == NodeState.UNHEALTHY
    assert health.reasons[0] == "GPU 0: XID 79, fell off the bus (critical, telemetry watch)"

    services.clear_event(event=event, by=ClearedBy.VALIDATION, reason="dcgmi diag -r 3 passed", at=T0)
    assert services.node_health(node).state == NodeState.DEGRADED


def test_a_cable_event_names_the_node_at_its_nic_end_and_a_switch_port_has_no_node():
    nic = make_nic()
    leaf = make_switch()
    cable = Cable.objects.create(a_nic=nic, b_switch=leaf, b_port="swp7", speed_gbps=400, label="C-0007")

    on_cable = services.record_event(
        component=cable, source=Source.SWEEP, kind="link_degraded", severity=Severity.MAJOR,
        summary="link at 200 Gb/s (planned 400)", evidence={"measured_gbps": 200}, at=T0,
    )  # fmt: skip
    on_port = services.record_event(
        component=services.Component.switch_port(leaf, "swp7"), source=Source.SWEEP, kind="link_degraded",
        severity=Severity.MAJOR, summary="link at 200 Gb/s", at=T0,
    )  # fmt: skip

    assert (on_cable.node, on_cable.nic, on_cable.cable) == (nic.node, nic, cable)
    assert (on_cable.switch, on_cable.switch_port) == (leaf, "swp7")
    assert on_cable.component_label.startswith("cable C-0007")
    assert (on_port.node, on_port.switch, on_port.switch_port, on_port.component_label) == (
        None, leaf, "swp7", f"{leaf.name}:swp7",
    )  # fmt: skip
    assert services.node_health(nic.node).state == NodeState.UNHEALTHY
