"""The simulator's kept telemetry answers (SimulatorTelemetry._cached): a second read is handed the very series the
first was, with nothing copied, and no reader can change them for the next."""

import dataclasses

import pytest

from apps.core.audit import audit_context
from apps.core.choices import ChangeSource
from apps.inventory.models import Node
from apps.inventory.services import drain_nodes
from apps.monitoring import telemetry
from apps.monitoring.telemetry import SimulatorTelemetry, Window
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.workloads.demo import load_workloads
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db

HOSTS = ["gpu001", "gpu002"]


def _window() -> Window:
    return Window.named("1h")


def worked_out_spans(monkeypatch) -> list[float]:
    """The spans of the windows whose GPU readings or service tokens are worked out from here on (not carried)."""
    spans = []
    real_points, real_tokens = SimulatorTelemetry._node_points, SimulatorTelemetry._tokens_per_second
    monkeypatch.setattr(
        SimulatorTelemetry,
        "_node_points",
        lambda self, f, host, w: spans.append(w.span) or real_points(self, f, host, w),
    )
    monkeypatch.setattr(
        SimulatorTelemetry, "_tokens_per_second", lambda self, s, w: spans.append(w.span) or real_tokens(self, s, w)
    )
    return spans


def test_a_kept_answer_is_handed_out_again_without_a_copy(demo_cluster):
    first = SimulatorTelemetry().gpu_series("util", hostnames=HOSTS, window=_window())
    again = SimulatorTelemetry().gpu_series("util", hostnames=HOSTS, window=_window())
    assert len(first) == 16 and all(one.points for one in first)  # two nodes of eight GPUs, a point a step
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_no_reader_can_change_a_kept_answer(demo_cluster):
    source = SimulatorTelemetry()
    series = source.gpu_series("util", hostnames=HOSTS, window=_window())
    one = series[0]
    labels, points = dict(one.labels), list(one.points)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.points = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.labels = {}
    with pytest.raises(TypeError):
        one.labels["gpu"] = "99"
    with pytest.raises(AttributeError):
        one.points.append((0.0, 0.0))
    with pytest.raises(TypeError):
        one.points[0] = (0.0, 0.0)
    if isinstance(series, list):
        series.clear()  # the caller's own list, not the kept one
    with pytest.raises((TypeError, AttributeError)):
        SimulatorTelemetry().gpu_series("util", hostnames=HOSTS, window=_window()).clear()
    kept = SimulatorTelemetry().gpu_series("util", hostnames=HOSTS, window=_window())
    assert len(kept) == 16 and dict(kept[0].labels) == labels and list(kept[0].points) == points


def test_the_kept_serving_series_and_busy_seconds_cannot_be_changed_either(demo_cluster):
    source, window = SimulatorTelemetry(), _window()
    busy = source.sm_active_seconds(hostnames=HOSTS, start=window.start, end=window.end)
    assert len(busy) == 16
    with pytest.raises(TypeError):
        busy[("gpu001", "0")] = 0.0
    tokens = source.tokens_per_second(service="no-such-service", window=window)
    with pytest.raises(AttributeError):
        tokens.points.append((0.0, 0.0))


def test_after_a_fault_on_one_node_only_its_part_is_worked_out_again_and_the_answers_are_a_fresh_reckonings(
    demo_cluster, monkeypatch
):
    window = _window()
    fleet = list(Node.objects.filter(gpus__isnull=False).distinct().values_list("hostname", flat=True))
    booted = Node.objects.first().created
    Node.objects.update(created=booted.fromtimestamp(window.start - 3600, booted.tzinfo))  # on, and counting, all hour

    def answers():
        source = SimulatorTelemetry()
        return (
            source.gpu_series("util", hostnames=fleet, window=window, aggregate="avg")[0].points,
            source.gpu_series("power", hostnames=fleet, window=window, aggregate="sum")[0].points,
            source.energy_joules(hostnames=fleet, start=window.start, end=window.end),
        )

    before = answers()
    fault = simulator.inject_fault(node=Node.objects.get(hostname="gpu005"), kind="xid79", target="3")
    SimFault.objects.filter(pk=fault.pk).update(created=fault.created.fromtimestamp(window.start, fault.created.tzinfo))
    worked_out = []
    real_points, real_energy = SimulatorTelemetry._node_points, SimulatorTelemetry._node_energy
    monkeypatch.setattr(
        SimulatorTelemetry,
        "_node_points",
        lambda self, field, host, w: worked_out.append(host) or real_points(self, field, host, w),
    )
    monkeypatch.setattr(
        SimulatorTelemetry,
        "_node_energy",
        lambda self, host, a, b: worked_out.append(host) or real_energy(self, host, a, b),
    )

    after = answers()
    assert set(worked_out) == {"gpu005"} and len(worked_out) == 3  # 31 of the 32 nodes' parts were kept
    assert after[1][-1][1] < before[1][-1][1] and after[2] < before[2]  # a GPU off the bus: less power and energy
    telemetry.ANSWERS.clear()
    telemetry.NODE_PARTS.clear()
    assert answers() == after  # what every node worked out afresh gives


def test_an_answer_stays_kept_through_a_drain_or_an_edit_and_a_fault_on_one_of_its_nodes_works_it_out_again(
    demo_cluster,
):
    def series():
        return SimulatorTelemetry().gpu_series("util", hostnames=HOSTS, window=_window())

    first = series()
    drain_nodes(nodes=Node.objects.filter(hostname="gpu001"), reason="fan noise")
    node = Node.objects.get(hostname="gpu002")
    node.comments = "checked the fans"
    node.save()
    assert all(a is b for a, b in zip(first, series(), strict=True))  # what the GPUs read did not move

    simulator.inject_fault(node=Node.objects.get(hostname="gpu009"), kind="xid79", target="3")
    assert all(a is b for a, b in zip(first, series(), strict=True))  # a fault elsewhere
    fault = simulator.inject_fault(node=Node.objects.get(hostname="gpu002"), kind="xid79", target="3")
    assert all(a is b for a, b in zip(first, series(), strict=True))  # it struck after the window's end
    struck = _window().end - 60  # within the window
    SimFault.objects.filter(pk=fault.pk).update(created=fault.created.fromtimestamp(struck, fault.created.tzinfo))
    assert all(a is not b for a, b in zip(first, series(), strict=True))


def test_a_window_moved_on_by_steps_carries_its_kept_series_forward_and_equals_a_fresh_reckoning(
    demo_cluster, monkeypatch
):
    with audit_context(source=ChangeSource.COMMAND):
        load_workloads()
    fleet = list(Node.objects.filter(gpus__isnull=False).distinct().values_list("hostname", flat=True))
    first = _window()
    booted = Node.objects.first().created
    Node.objects.update(created=booted.fromtimestamp(first.start - 3600, booted.tzinfo))
    moved = dataclasses.replace(first, end=first.end + 2 * first.step)  # what the page asks two minutes later
    service = InferenceService.objects.get().name

    def answers(window):
        source = SimulatorTelemetry()
        return (
            source.gpu_series("util", hostnames=fleet, window=window, aggregate="avg")[0].points,
            [one.points for one in source.gpu_series("power", hostnames=HOSTS, window=window)],
            source.tokens_per_second(service=service, window=window).points,
            source.energy_joules(hostnames=fleet, start=window.start, end=window.end),
        )

    answers(first)
    spans = worked_out_spans(monkeypatch)
    carried = answers(moved)
    assert spans and set(spans) == {2 * first.step}  # only the two new steps were worked out
    assert [t for t, _ in carried[0]] == moved.times()

    telemetry.ANSWERS.clear()
    telemetry.NODE_PARTS.clear()
    fresh = answers(moved)
    assert carried[:3] == fresh[:3]
    assert carried[3] == pytest.approx(fresh[3], rel=1e-9)  # the energy less its first steps plus the new ones


def test_after_a_fault_the_points_before_it_are_carried_over_and_only_the_steps_from_it_worked_out(
    demo_cluster, monkeypatch
):
    with audit_context(source=ChangeSource.COMMAND):
        load_workloads()
    window = _window()
    booted = Node.objects.first().created
    Node.objects.update(created=booted.fromtimestamp(window.start - 3600, booted.tzinfo))
    service = InferenceService.objects.get()
    faulty = service.nodes.order_by("hostname").first()

    def answers():
        source = SimulatorTelemetry()
        return (
            [one.points for one in source.gpu_series("power", hostnames=[faulty.hostname], window=window)],
            source.tokens_per_second(service=service.name, window=window).points,
        )

    before = answers()
    fault = simulator.inject_fault(node=faulty, kind="xid79", target="0")  # GPU 0 falls off the bus
    struck = window.end - 10 * window.step + 1  # ten steps before the window's end, and a second
    SimFault.objects.filter(pk=fault.pk).update(created=fault.created.fromtimestamp(struck, fault.created.tzinfo))
    spans = worked_out_spans(monkeypatch)
    carried = answers()
    assert spans and set(spans) == {10 * window.step}  # from the last step before the fault to the end
    assert carried != before and carried[0][0][-1][0] < window.end  # GPU 0 has no power reading since
    assert carried[0][0][:50] == before[0][0][:50] and carried[1][:50] == before[1][:50]

    telemetry.ANSWERS.clear()
    telemetry.NODE_PARTS.clear()
    assert answers() == carried  # what a fresh reckoning gives
