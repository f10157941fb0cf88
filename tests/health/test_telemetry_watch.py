"""The telemetry watch is a producer: a GPU the telemetry reports an XID or uncorrectable ECC errors for is a health
event on that GPU, read through the telemetry interface (here the simulator's recorded minutes, as in the embedded
wiring); the same reading each minute is one event, and a fault gone quiet stays open until it is cleared."""

import datetime as dt

import pytest
from django.conf import settings

from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring import recorder, watch
from apps.simulator import services as simulator
from apps.simulator.models import SimFault

pytestmark = pytest.mark.django_db

T = 1_790_000_000 // 86_400 * 86_400  # a fixed midnight


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@pytest.fixture
def fleet(db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    Node.objects.update(created=_at(T - 86_400))
    return {node.hostname: node for node in Node.objects.all()}


def _inject(node, kind, target, since, **parameters):
    fault = simulator.inject_fault(node=node, kind=kind, target=target, parameters=parameters)
    SimFault.objects.filter(pk=fault.pk).update(created=_at(since))
    return SimFault.objects.get(pk=fault.pk)


def test_the_watch_is_one_of_the_periodic_tasks():
    assert settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.watch_telemetry"] == 60


def test_an_xid_and_uncorrectable_ecc_errors_in_the_telemetry_are_events_on_their_gpus(fleet):
    xid = _inject(fleet["gpu004"], "xid79", "2", T - 90)
    _inject(fleet["gpu002"], "ecc", "5", T - 90, count=3)
    recorder.record_telemetry(until=T)

    events = watch.watch_telemetry(now=T + 45)

    by_kind = {event.kind: event for event in events}
    assert set(by_kind) == {"xid79", "xid48", "ecc_uncorrectable"}  # the simulator's ECC fault raises XID 48 too
    fell_off = by_kind["xid79"]
    assert (fell_off.gpu.node.hostname, fell_off.gpu.index) == ("gpu004", 2)
    assert (fell_off.source, fell_off.severity) == (Source.TELEMETRY, Severity.CRITICAL)
    assert fell_off.summary == "GPU 2: XID 79, GPU has fallen off the bus"
    assert fell_off.evidence[0]["metric"] == "DCGM_FI_DEV_XID_ERRORS" and fell_off.evidence[0]["xid"] == 79
    ecc = by_kind["ecc_uncorrectable"]
    assert (ecc.gpu.node.hostname, ecc.gpu.index, ecc.evidence[0]["ecc_dbe"]) == ("gpu002", 5, 3)
    assert health.node_health(fleet["gpu004"]).state == "unhealthy"

    # The next minute reads the same fault: one event, seen later, not counted twice.
    watch.watch_telemetry(now=T + 45 + 15)
    fell_off.refresh_from_db()
    assert HealthEvent.objects.count() == 3 and fell_off.count == 1 and fell_off.last_seen == _at(T + 60)

    # The fault cleared in the simulator: the watch reads nothing new, and the event stays open until cleared.
    simulator.clear_fault(fault=xid)
    recorder.record_telemetry(until=T + 300)
    assert [event.kind for event in watch.watch_telemetry(now=T + 300)] == ["xid48", "ecc_uncorrectable"]
    fell_off.refresh_from_db()
    assert fell_off.is_open
    health.clear_event(event=fell_off, by=ClearedBy.OPERATOR, reason="node power-cycled, GPU back", at=_at(T + 400))
    assert health.node_health(fleet["gpu004"]).state == "healthy"


def test_a_healthy_fleet_and_unreadable_telemetry_record_nothing(fleet):
    recorder.record_telemetry(until=T)
    assert watch.watch_telemetry(now=T + 45) == []
    assert watch.watch_telemetry(now=T + 3600) == []  # nothing recorded within the lookback: read next minute
    assert not HealthEvent.objects.exists()
