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
from apps.monitoring.telemetry import TelemetryError, telemetry
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
    assert settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.watch_telemetry"] == 30


def test_an_xid_and_uncorrectable_ecc_errors_in_the_telemetry_are_events_on_their_gpus(fleet):
    xid = _inject(fleet["gpu004"], "xid79", "2", T - 90)
    _inject(fleet["gpu002"], "ecc", "5", T - 90, count=3)
    recorder.record_telemetry(until=T)

    events = watch.watch_telemetry(now=T + 45)

    by_kind = {event.kind: event for event in events}
    # The simulator's ECC fault raises XID 48 and leaves a row remap pending, as a real one does.
    assert set(by_kind) == {"xid79", "xid48", "ecc_uncorrectable", "row_remap_pending"}
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
    assert HealthEvent.objects.count() == 4 and fell_off.count == 1 and fell_off.last_seen == _at(T + 60)

    # The fault cleared in the simulator: the watch reads nothing new, and the event stays open until cleared.
    simulator.clear_fault(fault=xid)
    recorder.record_telemetry(until=T + 300)
    assert [event.kind for event in watch.watch_telemetry(now=T + 300)] == [
        "xid48",
        "ecc_uncorrectable",
        "row_remap_pending",
    ]
    fell_off.refresh_from_db()
    assert fell_off.is_open
    health.clear_event(event=fell_off, by=ClearedBy.OPERATOR, reason="node power-cycled, GPU back", at=_at(T + 400))
    assert health.node_health(fleet["gpu004"]).state == "healthy"


def test_a_healthy_fleet_records_nothing(fleet):
    assert watch.watch_telemetry(now=T + 45) == []
    assert not HealthEvent.objects.exists()


def test_unreadable_telemetry_records_nothing_and_is_tried_again(fleet, monkeypatch, caplog):
    class Unreachable:
        def gpu_values_now(self, fields, *, hostnames, at):
            raise TelemetryError("could not reach Prometheus at http://127.0.0.1:9")

    _inject(fleet["gpu001"], "xid79", "0", T - 90)
    monkeypatch.setattr(watch, "telemetry", Unreachable)
    assert watch.watch_telemetry(now=T) == []
    assert not HealthEvent.objects.exists() and "could not reach Prometheus" in caplog.text


def _kinds(events) -> dict[tuple[str, int, str], HealthEvent]:
    return {(event.gpu.node.hostname, event.gpu.index, event.kind): event for event in events}


def test_each_fault_the_simulator_models_is_its_event_on_its_gpu(fleet):
    _inject(fleet["gpu001"], "nvlink_down", "1", T - 600, link=3)
    _inject(fleet["gpu001"], "thermal", "2", T - 600, temperature=95)
    _inject(fleet["gpu002"], "pcie_downtrained", "3", T - 600, gen=4, width=8)
    _inject(fleet["gpu003"], "ecc", "4", T - 600, count=9)  # more rows than a bank can spare

    events = _kinds(watch.watch_telemetry(now=T))

    assert set(events) == {
        ("gpu001", 1, "xid74"),
        ("gpu001", 1, "nvlink_degraded"),  # the link's state says it too (apps/monitoring/nvlink_watch.py)
        ("gpu001", 2, "gpu_thermal_slowdown"),
        ("gpu002", 3, "pcie_downtrained"),
        ("gpu003", 4, "xid48"),
        ("gpu003", 4, "ecc_uncorrectable"),
        ("gpu003", 4, "row_remap_pending"),
        ("gpu003", 4, "row_remap_failure"),
    }
    nvlink = events[("gpu001", 1, "xid74")]
    assert (nvlink.severity, nvlink.summary) == (Severity.MAJOR, "GPU 1: XID 74, NVLINK Error")
    assert nvlink.evidence[0]["metric"] == "DCGM_FI_DEV_XID_ERRORS"
    hot = events[("gpu001", 2, "gpu_thermal_slowdown")]
    assert hot.severity == Severity.MAJOR  # HW thermal slowdown, not only SW
    assert hot.evidence[0]["metric"] == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
    assert {"hw_thermal_slowdown", "sw_thermal_slowdown"} <= set(hot.evidence[0]["reasons"])
    assert hot.evidence[0]["value"] & 0x40
    pcie = events[("gpu002", 3, "pcie_downtrained")]
    assert (pcie.severity, pcie.summary) == (
        Severity.MINOR,
        "GPU 3: PCIe link downtrained to Gen4 x8 (capable of Gen5 x16)",
    )
    assert pcie.evidence[0] | {"at": None} == {
        "at": None,
        "source": "telemetry",
        "metric": "DCGM_FI_DEV_PCIE_LINK_WIDTH",
        "pcie_gen": 4,
        "pcie_max_gen": 5,
        "pcie_width": 8,
        "pcie_max_width": 16,
    }
    failed = events[("gpu003", 4, "row_remap_failure")]
    assert (failed.severity, failed.evidence[0]["metric"]) == (Severity.CRITICAL, "DCGM_FI_DEV_ROW_REMAP_FAILURE")
    pending = events[("gpu003", 4, "row_remap_pending")]
    assert (pending.severity, pending.evidence[0]["metric"]) == (Severity.MAJOR, "DCGM_FI_DEV_ROW_REMAP_PENDING")
    assert health.node_health(fleet["gpu004"]).state == "healthy"


def test_a_lower_pcie_generation_on_an_idle_gpu_is_its_power_saving_not_a_fault(fleet):
    _inject(fleet["gpu002"], "pcie_downtrained", "3", T - 600, gen=3, width=16)
    assert watch.watch_telemetry(now=T) == []


def test_a_fault_shows_within_a_minute_without_waiting_for_the_minute_record(fleet):
    """The latency the dashboard shows: a fault injected at t is an event from the watch's next run, at most its
    period (30 s) later, with nothing recorded meanwhile (the record is written a minute after its minute)."""
    period = settings.RACKPILOT_PERIODIC_TASKS["rackpilot.monitoring.watch_telemetry"]
    assert period <= 60
    t = T + 17
    _inject(fleet["gpu003"], "xid79", "6", t)
    assert watch.watch_telemetry(now=t - 1) == []
    [event] = watch.watch_telemetry(now=t + period)
    assert (event.kind, event.gpu.index, event.first_seen) == ("xid79", 6, _at(t + period))
    assert not recorder.recorded_times(recorder.MINUTE_PART, [T, T + 60])


class Readings:
    """A telemetry source answering the watch's question with fixed readings (what a real dcgm-exporter can show and
    the simulator does not model: the power brake, a GPU gone from the series without an XID)."""

    def __init__(self, readings: dict[tuple[str, str], dict]):
        self.readings = readings

    def gpu_values_now(self, fields, *, hostnames, at):
        return {name: {key: values[name] for key, values in self.readings.items() if name in values} for name in fields}

    def nic_values_now(self, *, hostnames, at):
        return {}

    def nvlink_values_now(self, *, hostnames, at):
        return {}

    def imex_values_now(self, *, hostnames, at):
        return {}


def test_a_power_brake_and_a_gpu_gone_from_the_series_are_events(fleet, monkeypatch):
    healthy = {"xid": 0.0, "ecc_dbe": 0.0, "util": 0.0, "clock_reasons": 1.0}
    readings = {("gpu001", str(index)): dict(healthy) for index in range(8)}
    readings[("gpu001", "5")]["clock_reasons"] = float(0x80 | 0x8)  # HW slowdown, asserted by the power brake
    del readings[("gpu001", "7")]
    monkeypatch.setattr(watch, "telemetry", lambda: Readings(readings))

    events = _kinds(watch.watch_telemetry(now=T))

    assert set(events) == {("gpu001", 5, "gpu_power_brake_slowdown"), ("gpu001", 7, "gpu_missing")}
    brake = events[("gpu001", 5, "gpu_power_brake_slowdown")]
    assert brake.severity == Severity.MAJOR
    assert brake.evidence[0]["reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    missing = events[("gpu001", 7, "gpu_missing")]
    assert missing.severity == Severity.CRITICAL
    # gpu002-gpu004 report nothing at all: a node whose exporter is down is not four missing GPUs each.
    assert not HealthEvent.objects.filter(node__hostname="gpu002").exists()


def test_a_hung_node_gone_from_the_series_is_not_eight_missing_gpus(fleet):
    """node_hang: the node's exporters answer nothing, so every series of it stops. That is one node problem
    (node_unreachable, from the kernel-log reads), not a gpu_missing per GPU: the watch skips a node with no series."""
    _inject(fleet["gpu003"], "node_hang", "", T - 90)
    _inject(fleet["gpu004"], "xid79", "2", T - 90)

    values = telemetry().gpu_values_now(("util", "xid"), hostnames=["gpu003", "gpu004"], at=T + 45)
    assert {host for host, _ in values["util"]} | {host for host, _ in values["xid"]} == {"gpu004"}

    events = _kinds(watch.watch_telemetry(now=T + 45))

    assert set(events) == {("gpu004", 2, "xid79")}
    assert not HealthEvent.objects.filter(node__hostname="gpu003").exists()
