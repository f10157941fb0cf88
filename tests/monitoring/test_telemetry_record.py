"""The embedded wiring's telemetry record (apps.monitoring.recorder): appended every minute with the cluster as it is
then, never rewritten; backfilled for the pages' windows with progress; read by the pages instead of working the fleet
out. The clock is the `until` the recorder is given and the `end` of the windows read."""

import datetime as dt
import logging
import math

import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.monitoring import gpuhours, recorder, services
from apps.monitoring.models import RecordedSample, Slo
from apps.monitoring.telemetry import (
    BUSY_PART,
    RECORDED_E2E_BUCKETS,
    RECORDED_E2E_P99,
    RECORDED_FLEET,
    RECORDED_NODE_BUSY,
    RECORDED_TOKENS,
    SLO_VALUE,
    SimulatorTelemetry,
    TelemetryPending,
    Window,
    histogram_quantile,
)
from apps.simulator import services as simulator
from apps.simulator.models import SimFault
from apps.workloads.models import InferenceService

pytestmark = pytest.mark.django_db

T = 1_790_000_000 // 86_400 * 86_400  # a fixed midnight: every window's steps fall on it
XID = RECORDED_FLEET[("xid", "max")]


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@pytest.fixture
def chat(db):
    """Four nodes, booted three days before T; a service on two of them since two days before T."""
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    service = InferenceService.objects.create(name="chat", model="m", design_tokens_per_second=4000)
    service.nodes.set(Node.objects.filter(hostname__in=["gpu001", "gpu002"]))
    InferenceService.objects.update(created=_at(T - 2 * 86_400))
    Node.objects.update(created=_at(T - 3 * 86_400))
    return InferenceService.objects.get()


def _series(name: str, until: float, labels: str = "") -> dict[int, float]:
    return dict(RecordedSample.objects.of(name, labels).filter(time__lte=until).values_list("time", "value"))


def test_a_cleared_fault_leaves_what_was_recorded_and_changes_only_what_is_recorded_after(chat):
    fault = simulator.inject_fault(node=Node.objects.get(hostname="gpu003"), kind="xid79", target="3")
    SimFault.objects.filter(pk=fault.pk).update(created=_at(T - 1800))  # off the bus for the last half hour
    recorder.record_telemetry(until=T)
    before = _series(XID, T)
    assert before[T] == 79 and before[T - 1800] == 79 and before[T - 1860] == 0

    simulator.clear_fault(fault=SimFault.objects.get(pk=fault.pk))
    recorder.record_telemetry(until=T + 600)

    after = _series(XID, T + 600)
    assert {t: after[t] for t in before} == before  # the past stays as it was recorded
    assert [after[T + k * 60] for k in range(1, 11)] == [0.0] * 10  # the future is the cleared cluster's


def test_recording_twice_records_once(chat):
    first = recorder.record_telemetry(until=T)
    rows = RecordedSample.objects.count()
    assert first == 60 + 3 * 12  # the last hour's minutes, and its 5-minute steps thrice (buckets, energy, busy)
    assert recorder.record_telemetry(until=T) == 0 and RecordedSample.objects.count() == rows
    assert recorder.record_telemetry(until=T + 90) == 1  # one new minute
    assert RecordedSample.objects.of(recorder.MARK, recorder.MINUTE_PART).filter(time=T + 60).exists()


def test_rows_past_the_retention_are_pruned(chat):
    recorder.record_telemetry(until=T)
    recorder.record_telemetry(until=T + recorder.RETENTION_S + 120)
    assert not RecordedSample.objects.filter(time__lte=T).exists()


def test_a_page_before_the_backfill_says_how_far_the_record_is_and_the_backfill_logs_its_progress(chat, caplog):
    window = Window.named("24h", end=T)
    assert services.cluster_page(window=window)["error"] == "telemetry being recorded: 0 %"
    recorder.record_telemetry(until=T)  # the last hour: two of the day's 61 steps (24 minutes apart) are in it
    assert services.cluster_page(window=window)["error"] == f"telemetry being recorded: {int(100 * 3 / 61)} %"

    with caplog.at_level(logging.INFO, logger="apps.monitoring.recorder"):
        recorded = recorder.backfill(until=T)

    steps = sum(len(times) for times in recorder.backfill_times(until=T).values())
    assert 0 < recorded < steps  # the last hour's steps were recorded already
    progress = [record.getMessage() for record in caplog.records if "recorded" in record.getMessage()]
    assert progress[-1] == f"Telemetry backfill: recorded {recorded:,} of {recorded:,} steps"
    assert len(progress) > 2  # a line a batch
    assert services.cluster_page(window=window)["error"] == ""
    assert recorder.backfill(until=T) == 0  # done: nothing to do again


def test_the_cluster_page_reads_the_record_and_works_out_the_service_alone(chat, monkeypatch):
    recorder.record_telemetry(until=T)
    recorder.backfill(until=T)
    built = []
    real = simulator.telemetry_model
    monkeypatch.setattr(simulator, "telemetry_model", lambda **kw: built.append(kw.get("hostnames")) or real(**kw))
    window = Window.named("24h", end=T)

    context = services.cluster_page(window=window)

    assert not context["error"] and context["services"][0]["mean_tokens_per_second"] > 0
    assert built and all(hostnames == ["gpu001", "gpu002"] for hostnames in built)  # the service's energy, alone
    recorded = _series(RECORDED_FLEET[("util", "avg")], T)
    panel = SimulatorTelemetry().fleet_series("util", "avg", hostnames=[], window=window)[0]
    assert panel.points == [(float(t), recorded[int(t)]) for t in window.times()]
    tokens = SimulatorTelemetry().tokens_per_second(service="chat", window=window)
    rates = _series(RECORDED_TOKENS, T, "service=chat")
    # avg_over_time of the recorded 5-minute rates over each step: the last step's 24 minutes are all recorded, an
    # earlier step (backfilled) has its own sample alone.
    last = [rate for t, rate in rates.items() if T - window.step < t <= T]
    assert len(last) == 24 and tokens.points[-1] == (float(T), pytest.approx(sum(last) / 24))
    earlier = T - 10 * window.step
    assert dict(tokens.points)[earlier] == pytest.approx(rates[int(earlier)])


def test_the_slo_counts_are_the_recorded_verdicts_of_every_slo_at_once(chat):
    # Targets on either side of what the service does: one SLO met every minute, the other never.
    Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=1)
    Slo.objects.create(name="chat, busy", objective="gpu_utilisation", scope="service", service=chat, target=100)
    recorder.record_telemetry(until=T)
    source = SimulatorTelemetry()

    counted = source.recorded_slo_counts(slos=["chat-util", "chat, busy", "unjudged"], span=3600, end=T)

    for name in ("chat-util", "chat, busy"):
        verdicts = RecordedSample.objects.of(recorder.SLO_GOOD, f"slo={name}").filter(time__gt=T - 3600)
        assert counted[name] == (verdicts.count(), sum(verdicts.values_list("value", flat=True)))
        assert counted[name] == source.recorded_slo_counts(slos=[name], span=3600, end=T)[name]
    assert counted == {"chat-util": (60, 60), "chat, busy": (60, 0), "unjudged": (0, 0)}
    with pytest.raises(TelemetryPending):  # the day is not recorded: no count from an hour of it
        source.recorded_slo_counts(slos=["chat-util"], span=86_400, end=T)


def test_where_prometheus_records_nothing_is_recorded_here_and_one_run_at_a_time_in_the_embedded_loop(chat, settings):
    assert recorder._RUNNING.acquire(blocking=False)
    try:
        assert recorder.record_in_background() is None  # the first backfill still running: this minute waits
    finally:
        recorder._RUNNING.release()
    settings.RACKPILOT_PROMETHEUS_URL = "http://127.0.0.1:9090"
    assert recorder.record_in_background() is None
    assert recorder.record_telemetry(until=T) == 0 and recorder.backfill(until=T) == 0
    assert not RecordedSample.objects.exists()


def test_the_gpus_reporting_errors_are_read_from_the_recorded_minute(chat):
    fault = simulator.inject_fault(node=Node.objects.get(hostname="gpu004"), kind="xid79", target="2")
    SimFault.objects.filter(pk=fault.pk).update(created=_at(T - 90))
    recorder.record_telemetry(until=T)
    source = SimulatorTelemetry()
    hosts = ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert source.gpu_values_at("xid", hostnames=hosts, at=T + 45) == {("gpu004", "2"): 79.0}  # the minute before
    assert source.gpu_values_at("xid", hostnames=hosts, at=T - 120) == {}  # before the fault struck
    assert source.gpu_values_at("xid", hostnames=["gpu001"], at=T) == {}
    with pytest.raises(TelemetryPending):
        source.gpu_values_at("xid", hostnames=hosts, at=T + 600)  # nothing recorded within the lookback


def _no_model(*args, **kwargs):
    raise AssertionError("a fleet read built the simulator's model")


def test_the_nodes_busy_gpu_seconds_are_recorded_in_5_minute_tiles_and_the_dashboards_gpu_hours_read_them(
    chat, monkeypatch, django_assert_num_queries
):
    now = T + 2800  # the day's window ends at its step before now (T + 1440): its tiles from T - 84,960 are recorded
    recorder.record_telemetry(until=now)
    recorder.backfill(until=now)
    window = Window.named("24h", end=now)
    hosts = ["gpu001", "gpu002", "gpu003", "gpu004"]
    model = simulator.telemetry_model(workloads=SimulatorTelemetry().workloads, seed=0)
    start, end = (edge // 300 * 300 for edge in (window.start, window.end))  # the window's edges on the tiles
    worked_out = {host: 8 * model.sm_active_seconds(host, start, end) for host in hosts}
    assert worked_out["gpu001"] > 0 and worked_out["gpu003"] == 0  # the service's nodes are busy, the others idle

    monkeypatch.setattr(simulator, "telemetry_model", _no_model)
    read = SimulatorTelemetry().node_busy_seconds(hostnames=hosts, start=window.start, end=window.end)
    assert set(read) == {"gpu001", "gpu002"}  # an idle node's zero is not kept
    for host in read:
        assert read[host] == pytest.approx(worked_out[host], rel=1e-6)
    with django_assert_num_queries(7):  # the nodes, their GPUs, the tiles' marks and sums, the two holders' reads
        panel = gpuhours.dashboard_panel(end=now)
    assert not panel["error"] and panel["cluster"].gpus == 32
    assert panel["cluster"].busy == pytest.approx(sum(worked_out.values()) / 3600, rel=1e-6)
    assert [row["node"].hostname for row in panel["holders"]] == ["gpu001", "gpu002"]


def test_the_busy_tiles_are_append_only_and_a_window_they_do_not_cover_is_worked_out(chat):
    recorder.record_telemetry(until=T)
    busy = dict(RecordedSample.objects.of(RECORDED_NODE_BUSY, "Hostname=gpu001").values_list("time", "value"))
    assert sorted(busy) == [T - 3300 + 300 * k for k in range(12)] and min(busy.values()) > 0

    InferenceService.objects.all().delete()  # the service is gone: its nodes idle from now on
    recorder.record_telemetry(until=T + 600)
    after = dict(RecordedSample.objects.of(RECORDED_NODE_BUSY, "Hostname=gpu001").values_list("time", "value"))
    assert after == busy  # the past stays as recorded; the idle tiles after it keep no row
    assert RecordedSample.objects.of(recorder.MARK, BUSY_PART).filter(time__gt=T).count() == 2

    source = SimulatorTelemetry()
    hour = source.node_busy_seconds(hostnames=["gpu001"], start=T - 3600, end=T)
    assert hour == {"gpu001": pytest.approx(sum(busy.values()))}
    day = source.node_busy_seconds(hostnames=["gpu001"], start=T - 86_400, end=T)  # not recorded: the model's
    assert day == {"gpu001": 0.0}  # (worked out with the cluster as it is now: no service)


def test_the_slos_latest_value_is_the_recorded_one(chat, monkeypatch):
    slo = Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=40)
    recorder.record_telemetry(until=T)
    values = dict(RecordedSample.objects.of(SLO_VALUE, "slo=chat-util").values_list("time", "value"))
    verdicts = dict(RecordedSample.objects.of(recorder.SLO_GOOD, "slo=chat-util").values_list("time", "value"))
    assert sorted(values) == sorted(verdicts) and len(values) == 60
    assert all(verdicts[t] == float(value >= 40) for t, value in values.items())

    monkeypatch.setattr(services, "slo_values", _no_model)  # the SLI's series is not worked out for it
    assert services.slo_latest(SimulatorTelemetry(), slo.spec(), end=T) == values[T]
    assert services.slo_status(slo, end=T, windows=("1h",))["latest"] == values[T]


def test_the_gpu_fields_read_together_are_each_fields_series(chat):
    source, window = SimulatorTelemetry(), Window.named("1h", end=T)
    together = source.gpu_series_of(("util", "sm_clock"), hostnames=["gpu001", "gpu003"], window=window)
    for field in ("util", "sm_clock"):
        alone = source.gpu_series(field, hostnames=["gpu001", "gpu003"], window=window)
        assert len(alone) == 16 and [(s.labels, s.points) for s in together[field]] == [
            (s.labels, s.points) for s in alone
        ]


def test_the_windows_agree_the_30_days_count_the_misses_of_the_7_days(chat):
    """Misses of the last hours show in every window, each minute as a minute: 30 d's chart ends on its 12-hour step
    (here 6 h before now), but its count goes to now; its backfilled steps weigh the time they stand for."""
    now = T + 6 * 3600
    slo = Slo.objects.create(name="chat-util", objective="gpu_utilisation", scope="service", service=chat, target=1)
    Slo.objects.filter(pk=slo.pk).update(target=0)
    recorder.backfill(until=now)  # met all along at a target of 0 %
    Slo.objects.filter(pk=slo.pk).update(target=100)  # from now on every minute recorded misses
    recorder.record_times(minutes=recorder._grid(now - 3 * 3600, now - 3600, 60))
    misses = RecordedSample.objects.of(recorder.SLO_GOOD, "slo=chat-util").filter(value=0).count()
    assert 100 < misses <= 120  # the two hours' minutes, less those the backfill recorded (met) before

    source = SimulatorTelemetry()
    budgets = {name: services.slo_budget(source, slo.spec(), name, end=now) for name in services.SLO_WINDOWS}

    assert budgets["1h"].met is True
    missed = [budgets[name].judged - budgets[name].good for name in ("24h", "7d", "30d")]
    # The same minutes missed in each (the first miss also stands for the gap back to the backfill's step before it).
    assert missed[0] == missed[1] == missed[2] and misses <= missed[0] <= misses + 24
    # Judged for the time the record covers (here all of each window), not a row a backfilled step.
    assert [budgets[name].judged for name in services.SLO_WINDOWS] == [60, 1440, 7 * 1440, 30 * 1440]
    day = budgets["24h"]
    assert (
        day.burn_rate > 8
        and day.budget_remaining == 0
        and day.budget_text == f"exhausted, {day.burn_rate:.1f}\u00d7 over"
    )
    assert budgets["7d"].met is False and budgets["30d"].compliance == pytest.approx(1 - missed[0] / 43200)


def test_the_backfill_judges_the_long_window_at_every_time_of_day(chat):
    """The 30-day window's own steps (every 12 h) see two times of day; a daily peak's misses would never be judged."""
    minutes = recorder.backfill_times(until=T)["minutes"]
    older = [t for t in minutes if t <= T - 7 * 86_400]
    assert len({t % 86_400 for t in older}) >= 60  # every 24 minutes of the day
    assert max(b - a for a, b in zip(sorted(older), sorted(older)[1:], strict=False)) <= 168 * 60


def test_each_minute_records_each_services_p99_of_its_bucket_rates(chat):
    recorder.record_telemetry(until=T)
    p99 = _series(RECORDED_E2E_P99, T, "service=chat")
    assert sorted(p99) == [T - 3540 + 60 * k for k in range(60)]  # every minute of the hour
    buckets: dict[int, list[tuple[float, float]]] = {}
    for labels, t, rate in RecordedSample.objects.filter(series=RECORDED_E2E_BUCKETS).values_list(
        "labels", "time", "value"
    ):
        buckets.setdefault(t, []).append((float(labels.split(",")[0].removeprefix("le=")), rate))
    assert all(p99[t] == pytest.approx(histogram_quantile(0.99, buckets[t])) for t in p99)  # as the rule computes it
    assert min(p99.values()) > 0


# A service's requests each minute, cumulative by bucket (le, requests/s): its p99 99 ms; in the bad minute every
# request took 1 to 2.5 s (p99 2,485 ms).
GOOD = [(0.05, 50.0), (0.1, 100.0), (1.0, 100.0), (2.5, 100.0), (math.inf, 100.0)]
BAD = [(0.05, 0.0), (0.1, 0.0), (1.0, 0.0), (2.5, 100.0), (math.inf, 100.0)]
DAY = Window.named("24h", end=T)
BAD_MINUTE = T - 10 * int(DAY.step) - 7 * 60  # inside a 24-minute step, not on one


def _record_day(*, unmarked: int | None = None, p99_from: int = 0) -> None:
    """The record of the day's window as the minute runs leave it: each minute's mark, bucket rates and p99 (the
    p99s from `p99_from`: a record kept before they were recorded has none), but no mark at `unmarked`."""
    rows = []
    for t in range(int(DAY.start), int(DAY.end) + 1, 60):  # the start too: the chart's first step
        buckets = BAD if t == BAD_MINUTE else GOOD
        if t != unmarked:
            rows.append(RecordedSample(series=recorder.MARK, labels=recorder.MINUTE_PART, time=t, value=1.0))
        rows += recorder._bucket_rows(RECORDED_E2E_BUCKETS, "chat", buckets, t)
        if t >= p99_from:
            value = histogram_quantile(0.99, buckets)
            rows.append(RecordedSample(series=RECORDED_E2E_P99, labels="service=chat", time=t, value=value))
    RecordedSample.objects.bulk_create(rows, batch_size=2000)


def _service_row(chat) -> dict:
    source = SimulatorTelemetry()
    return services.service_rows(source.gather(services.service_questions(source, DAY, [chat])), [chat])[0]


def test_the_worst_p99_of_a_day_is_its_worst_minutes_where_the_chart_steps_read_lower(chat):
    _record_day()

    row = _service_row(chat)

    assert row["worst_p99_ms"] == pytest.approx(2485) and row["worst_p99_of"] == ""
    steps = SimulatorTelemetry().p99_latency_seconds(service="chat", window=DAY).values()
    assert 1000 * max(steps) < 2200  # the chart's 24-minute step dilutes the bad minute with 23 good ones


@pytest.mark.parametrize(
    "record",
    [
        {"unmarked": T - 3600},  # a minute of the window not recorded
        {"p99_from": DAY.start + 2 * 3600},  # the p99s recorded from within the window (a record kept before them)
    ],
)
def test_a_day_whose_minutes_are_not_all_recorded_takes_the_worst_of_its_steps_and_says_so(chat, record):
    _record_day(**record)

    row = _service_row(chat)

    steps = SimulatorTelemetry().p99_latency_seconds(service="chat", window=DAY).values()
    assert row["worst_p99_ms"] == pytest.approx(1000 * max(steps)) and row["worst_p99_of"] == "24 min"
