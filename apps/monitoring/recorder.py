"""The embedded wiring's telemetry record: what the services wiring's Prometheus records (the recording rules of
`telemetry_rules()` and the SLOs' `rackpilot:slo_good`), worked out from the simulator's model and appended as
RecordedSample rows, which SimulatorTelemetry reads as PrometheusTelemetry reads its recorded series.

- Every minute (beat, or the embedded loop): the fleet's GPU panels (avg / sum / max of the GPUs' gauges at t), each
  service's token rate and end-to-end latency bucket rates over 5 minutes and the p99 of those, and each SLO's value
  and verdict at t;
  every 5 minutes: the bucket rates again (the coarse series), the fleet's GPU energy over those 5 minutes and each
  node's busy GPU-seconds over them (the GPU-hours split).
- Append-only: a time is recorded once, with the cluster as it is when it is recorded (its faults, its workloads);
  a fault cleared later changes what is recorded after, never what was. Each recorded time and part leaves a mark
  (series `rackpilot:recorded`), by which a run finds what is missing and a page how much of its window is there.
- A backfill records the windows the pages show (1 h, 24 h, 7 d, 30 d) on their own step grids, the energy tiles of
  the longest and the busy tiles of the last day, so that a fresh install shows its charts within a minute or two;
  the minute recording then fills forward. Rows older than Prometheus' retention (35 d, the Makefile's `up`) are pruned.
"""

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import close_old_connections, connection

from apps.monitoring import services, slo
from apps.monitoring.models import RecordedSample, Slo
from apps.monitoring.telemetry import (
    BUSY_PART,
    BUSY_RECORDED_FOR_S,
    COARSE_INTERVAL_S,
    GPU_FIELDS,
    POINTS_PER_WINDOW,
    RECORDED_E2E_BUCKETS,
    RECORDED_E2E_BUCKETS_COARSE,
    RECORDED_E2E_P99,
    RECORDED_FLEET,
    RECORDED_FLEET_ENERGY,
    RECORDED_NODE_BUSY,
    RECORDED_TOKENS,
    RECORDING_INTERVAL_S,
    SLO_SPREAD_STEP_S,
    SLO_VALUE,
    WINDOWS,
    Window,
    current_workloads,
    histogram_quantile,
)
from apps.nodeexec import sim_telemetry as simulator
from apps.nodeexec.sim_telemetry import LATENCY_BUCKETS, ServingRun, split_counters

logger = logging.getLogger(__name__)

MARK = "rackpilot:recorded"  # one row per recorded time and part; its labels name the part
MINUTE_PART, BUCKETS_PART, ENERGY_PART = "part=1m", "part=5m", "part=energy"
SLO_GOOD = "rackpilot:slo_good"
RATE_RANGE_S = 300  # the rules' [5m]
ENERGY_WINDOW_S = 3600  # the energy SLO's increase over 1 h (slo.ENERGY_WINDOW)
RETENTION_S = 35 * 86400  # Prometheus' --storage.tsdb.retention.time (Makefile `up`)
CATCH_UP_S = 3600  # a run records the missing minutes of the last hour; older gaps are the backfill's
BATCH = 200  # times worked out and written together (a write a batch, progress logged after each)
JOULES_PER_MJ = 1e-3
_FLEET_KEYS = {field: GPU_FIELDS[field][1] for field, _ in RECORDED_FLEET}
# Per GPU, where not zero: what the dashboard's "GPUs reporting XID or ECC errors now" reads (Prometheus is asked for
# the exporters' own series at an instant; zero is what every other GPU reports).
FLAGS = {GPU_FIELDS[field][0]: GPU_FIELDS[field][1] for field in ("xid", "ecc_dbe")}


def labels_key(**labels: str) -> str:
    """A sample's labels as the record keeps them: 'name=value' pairs sorted by name, joined by commas."""
    return ",".join(f"{name}={value}" for name, value in sorted(labels.items()))


def le_label(bound: float) -> str:
    """A bucket's upper bound as Prometheus writes its `le` label."""
    return "+Inf" if math.isinf(bound) else f"{bound:g}"


def recording_here() -> bool:
    """Whether this wiring records telemetry itself: only without a Prometheus, which records its own."""
    return not settings.RACKPILOT_PROMETHEUS_URL


# --- what is missing ---------------------------------------------------------------------------------------------


def recorded_times(part: str, times: Iterable[int]) -> set[int]:
    """Those of `times` whose part is recorded."""
    times = sorted(set(times))
    if not times:
        return set()
    marks = RecordedSample.objects.of(MARK, part).filter(time__gte=times[0], time__lte=times[-1])
    if len(times) < 500:
        marks = marks.filter(time__in=times)
    return set(marks.values_list("time", flat=True)) & set(times)


def _grid(start: float, end: float, step: int) -> list[int]:
    """The multiples of `step` in (start, end]."""
    first = math.floor(start / step) + 1
    return [k * step for k in range(first, math.floor(end / step) + 1)]


# --- what each part records --------------------------------------------------------------------------------------


class _Sampler:
    """One run's model of the cluster (built once: the inventory, its faults and the workloads as they are now) and
    the SLOs as they are now; works out the rows of a part at a time."""

    def __init__(self):
        self.workloads = current_workloads()
        self.model = simulator.telemetry_model(workloads=self.workloads, seed=settings.RACKPILOT_SIM_SEED)
        self.hostnames = list(self.model.histories)
        self.runs = {run.name: run for run in self.workloads.serving}
        self.specs = [row.spec() for row in Slo.objects.select_related("service", "training_job", "rack")]

    # the minute part

    def minute_rows(self, t: int) -> list[RecordedSample]:
        keys = frozenset(_FLEET_KEYS.values()) | frozenset(FLAGS.values())
        per_node: dict[str, dict[str, list[float]]] = {}  # hostname -> key -> its GPUs' values at t
        rows = [RecordedSample(series=MARK, labels=MINUTE_PART, time=t, value=1.0)]
        for hostname in self.hostnames:
            values: dict[str, list[float]] = {key: [] for key in keys}
            for index, reading in self.model.node_readings(hostname, t, keys=keys):
                for key in keys:
                    # A GPU off the bus reports nothing but its XID (79), as dcgm-exporter shows it.
                    value = (79 if key == "xid" else None) if reading is None else reading[key]
                    if value is not None:
                        values[key].append(float(value))
                for series, key in FLAGS.items():
                    value = (79 if key == "xid" else 0) if reading is None else reading[key]
                    if value:
                        labels = labels_key(Hostname=hostname, gpu=str(index))
                        rows.append(RecordedSample(series=series, labels=labels, time=t, value=float(value)))
            per_node[hostname] = values
        for (field, how), series in RECORDED_FLEET.items():
            values = [value for node in per_node.values() for value in node[_FLEET_KEYS[field]]]
            if values:
                rows.append(RecordedSample(series=series, labels="", time=t, value=_combine(how, values)))
        services = {name: self._service_at(run, t) for name, run in self.runs.items() if run.started <= t}
        for name, (tokens, buckets) in services.items():
            rows.append(RecordedSample(series=RECORDED_TOKENS, labels=labels_key(service=name), time=t, value=tokens))
            rows += _bucket_rows(RECORDED_E2E_BUCKETS, name, buckets, t)
            p99 = histogram_quantile(0.99, buckets)  # the rule's histogram_quantile; NaN (no request) keeps no row
            if not math.isnan(p99):
                rows.append(RecordedSample(series=RECORDED_E2E_P99, labels=labels_key(service=name), time=t, value=p99))
        for spec in self.specs:
            value = self._slo_value(spec, t, per_node, services)
            if value is None:
                continue
            labels = labels_key(slo=spec.name)
            rows.append(RecordedSample(series=SLO_GOOD, labels=labels, time=t, value=_verdict(spec, value)))
            if math.isfinite(value):  # what the page shows as the latest value (a NaN or ±Inf shows none)
                rows.append(RecordedSample(series=SLO_VALUE, labels=labels, time=t, value=value))
        return rows

    def _service_at(self, run: ServingRun, t: int) -> tuple[float, list[tuple[float, float]]]:
        """rate(tokens[5m]) and rate(e2e buckets[5m]) (cumulative, +Inf last) of a service at t."""
        parts = split_counters(self.model.service_totals(run, t - RATE_RANGE_S, t))
        buckets = [(le, count / RATE_RANGE_S) for le, count in zip(LATENCY_BUCKETS, parts["e2e_buckets"], strict=True)]
        buckets.append((math.inf, parts["requests"] / RATE_RANGE_S))
        return parts["generation_tokens"] / RATE_RANGE_S, buckets

    def _slo_value(self, spec: slo.SloSpec, t: int, per_node: dict, services: dict) -> float | None:
        """value_expression(spec) at t, where good_expression judges it (its verdict: _verdict; NaN and ±Inf are
        missed, as in PromQL); None absent (no such service, or its counter younger than the rate window: the warm
        guard)."""
        objective = slo.Objective(spec.objective)
        if objective == slo.Objective.GPU_UTILISATION:
            values = [value for host in spec.hosts for value in per_node.get(host, {}).get("util", [])]
            if not values:
                return None
            return sum(values) / len(values)
        run = self.runs.get(spec.service)
        window = ENERGY_WINDOW_S if objective == slo.Objective.ENERGY_PER_MTOK else RATE_RANGE_S
        if run is None or run.started > t - window:
            return None
        tokens, buckets = services[spec.service]
        if objective == slo.Objective.THROUGHPUT:
            value = 100 * tokens / spec.design_tokens_per_second if spec.design_tokens_per_second else math.nan
        elif objective == slo.Objective.LATENCY_P99:
            value = 1000 * histogram_quantile(0.99, buckets)
        else:
            joules = sum(self._node_energy(host, t - window, t) for host in spec.hosts)
            generated = self.model.service_tokens(run, t - window, t) + self.model.served_tokens(run, t - window, t)
            value = (joules / 3.6e6) / (generated / 1e6) if generated > 0 else (math.inf if joules else math.nan)
        return value

    def _node_energy(self, hostname: str, start: float, end: float) -> float:
        """increase() of the node's GPUs' energy counters over [start, end], in J (the counters start at boot)."""
        if hostname not in self.model.histories:
            return 0.0
        booted = self.model.histories[hostname].booted
        gpus = self.model.node_regime(hostname, end).gpus
        return sum(
            self.model.energy_j(hostname, gpu.index, max(start, booted), max(end, booted))
            for gpu, regime in gpus
            if regime.present
        )

    # the 5-minute parts

    def bucket_rows(self, t: int) -> list[RecordedSample]:
        rows = [RecordedSample(series=MARK, labels=BUCKETS_PART, time=t, value=1.0)]
        for name, run in self.runs.items():
            if run.started <= t:  # a service has no series before it started
                rows += _bucket_rows(RECORDED_E2E_BUCKETS_COARSE, name, self._service_at(run, t)[1], t)
        return rows

    def busy_rows(self, times: list[int]) -> list[RecordedSample]:
        """sum by (Hostname) (avg_over_time(SM active[5m])) * 300 at each time: each node's busy GPU-seconds over the
        5 minutes before it, for its GPUs that report (on the bus at either end); an idle node's zero is left out."""
        edges = sorted({edge for t in times for edge in (t - COARSE_INTERVAL_S, t)})
        rows = [RecordedSample(series=MARK, labels=BUSY_PART, time=t, value=1.0) for t in times]
        for hostname in self.hostnames:
            # The GPUs on the bus at each edge: those whose energy counter the model reads there.
            present = {sample[0]: len(sample[3]) for sample in self.model.samples(hostname, [float(e) for e in edges])}
            labels = labels_key(Hostname=hostname)
            for t in times:
                gpus = max(present.get(t - COARSE_INTERVAL_S, 0), present.get(t, 0))
                busy = self.model.sm_active_seconds(hostname, t - COARSE_INTERVAL_S, t) * gpus if gpus else 0.0
                if busy > 0:
                    rows.append(RecordedSample(series=RECORDED_NODE_BUSY, labels=labels, time=t, value=busy))
        return rows

    def energy_rows(self, times: list[int]) -> list[RecordedSample]:
        """sum(increase(energy[5m])) / 1000 at each time: the fleet's GPU energy over the 5 minutes before it."""
        edges = sorted({edge for t in times for edge in (t - COARSE_INTERVAL_S, t)})
        joules = dict.fromkeys(times, 0.0)
        for hostname in self.hostnames:
            counters = {sample[0]: sample[3] for sample in self.model.samples(hostname, [float(e) for e in edges])}
            for t in times:
                before, after = counters.get(t - COARSE_INTERVAL_S, {}), counters.get(t, {})
                for index, value in after.items():
                    start = before.get(index, 0)
                    joules[t] += (value - start if value >= start else value) * JOULES_PER_MJ  # a drop is a reset
        rows = []
        for t in times:
            rows.append(RecordedSample(series=MARK, labels=ENERGY_PART, time=t, value=1.0))
            rows.append(RecordedSample(series=RECORDED_FLEET_ENERGY, labels="", time=t, value=joules[t]))
        return rows


def _combine(how: str, values: list[float]) -> float:
    return {"avg": lambda v: sum(v) / len(v), "sum": sum, "max": max}[how](values)


def _verdict(spec: slo.SloSpec, value: float) -> float:
    return float(value >= spec.target if spec.criterion.at_least else value <= spec.target)


def _bucket_rows(series: str, service: str, buckets: list[tuple[float, float]], t: int) -> list[RecordedSample]:
    return [
        RecordedSample(series=series, labels=labels_key(le=le_label(le), service=service), time=t, value=rate)
        for le, rate in buckets
    ]


def _write(rows: list[RecordedSample]) -> int:
    """Append rows; one already recorded (another run got there first) is left as it was."""
    RecordedSample.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
    return len(rows)


# --- the runs ----------------------------------------------------------------------------------------------------


def record_times(
    *,
    minutes: Iterable[int] = (),
    buckets: Iterable[int] = (),
    energy: Iterable[int] = (),
    busy: Iterable[int] = (),
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Record the parts at those of the times that are not recorded yet (the minute part at a multiple of 60, the
    5-minute parts (buckets, energy, busy) at a multiple of 300); returns how many times were recorded.
    `progress(done, total)` after each batch."""
    todo = {
        MINUTE_PART: sorted(set(minutes) - recorded_times(MINUTE_PART, minutes)),
        BUCKETS_PART: sorted(set(buckets) - recorded_times(BUCKETS_PART, buckets)),
        ENERGY_PART: sorted(set(energy) - recorded_times(ENERGY_PART, energy)),
        BUSY_PART: sorted(set(busy) - recorded_times(BUSY_PART, busy), reverse=True),  # the newest first
    }
    total = sum(len(times) for times in todo.values())
    if not total:
        return 0
    sampler = _Sampler()
    done = 0
    for part, times in todo.items():
        for first in range(0, len(times), BATCH):
            batch = times[first : first + BATCH]
            if part == ENERGY_PART:
                rows = sampler.energy_rows(batch)
            elif part == BUSY_PART:
                rows = sampler.busy_rows(batch)
            else:
                work = sampler.minute_rows if part == MINUTE_PART else sampler.bucket_rows
                rows = [row for t in batch for row in work(t)]
            _write(rows)
            done += len(batch)
            if progress is not None:
                progress(done, total)
    return done


def record_telemetry(*, until: float) -> int:
    """Append every missing interval of the last hour up to `until`: the minute part at each minute, the 5-minute
    parts at each 5 minutes; then prune rows past the retention. Returns how many times were recorded (0 where a
    Prometheus records instead)."""
    if not recording_here():
        return 0
    recorded = record_times(
        minutes=_grid(until - CATCH_UP_S, until, RECORDING_INTERVAL_S),
        buckets=_grid(until - CATCH_UP_S, until, COARSE_INTERVAL_S),
        energy=_grid(until - CATCH_UP_S, until, COARSE_INTERVAL_S),
        busy=_grid(until - CATCH_UP_S, until, COARSE_INTERVAL_S),
    )
    RecordedSample.objects.filter(time__lt=until - RETENTION_S).delete()
    return recorded


def backfill_times(*, until: float) -> dict[str, list[int]]:
    """What the backfill records: each window's steps as a page asks for them now (the minute part; the coarse
    buckets at the 5 minutes before each), the shortest window first, then the SLOs' grid over the longest; the
    energy tiles of the longest; and the busy tiles of the last day (BUSY_RECORDED_FOR_S: the dashboard's GPU-hours;
    longer windows are read from the record as the minute runs fill it, worked out until then)."""
    minutes: list[int] = []
    buckets: list[int] = []
    earliest = min(Window.named(name, end=until).start for name in WINDOWS)
    # The windows' steps, then the SLOs' grid over the longest (SLO_SPREAD_STEP_S: every time of day, where the
    # 30-day steps see two), so that the long window judges what the shorter ones do.
    for name in WINDOWS:
        for t in Window.named(name, end=until).times():
            minutes.append(int(t))
            buckets.append(int(t) // COARSE_INTERVAL_S * COARSE_INTERVAL_S)
    minutes += _grid(earliest - SLO_SPREAD_STEP_S, until, SLO_SPREAD_STEP_S)[::-1]
    energy = _grid(earliest - COARSE_INTERVAL_S, until, COARSE_INTERVAL_S)
    return {
        "minutes": list(dict.fromkeys(minutes)),
        "buckets": list(dict.fromkeys(buckets)),
        "energy": energy[::-1],  # the newest first: the short windows' tiles are there soonest
        # The day's window as a page asks for it now: its end aligned down to its step (a 60th of it), the tile
        # before its start too.
        "busy": _grid(
            until - BUSY_RECORDED_FOR_S * (1 + 1 / POINTS_PER_WINDOW) - COARSE_INTERVAL_S, until, COARSE_INTERVAL_S
        ),
    }


def backfill(*, until: float) -> int:
    """Record what the pages' windows read before the minute recording began (backfill_times), logging progress
    ("recorded 1,200 of 9,000 steps"); returns how many times were recorded. Safe to run again: what is recorded
    is skipped."""
    if not recording_here():
        return 0
    started = time.monotonic()
    tenths_logged = [-1]

    def progress(done: int, total: int) -> None:
        tenths = done * 10 // total  # a line each tenth of the way, not each batch (the demo's backfill has 45)
        if tenths > tenths_logged[0]:
            tenths_logged[0] = tenths
            logger.info("Telemetry backfill: recorded %s of %s steps", f"{done:,}", f"{total:,}")

    recorded = record_times(**backfill_times(until=until), progress=progress)
    if recorded:
        logger.info("Telemetry backfill: %s steps in %.1f s", f"{recorded:,}", time.monotonic() - started)
        analyze_the_record()
    return recorded


def analyze_the_record() -> None:
    """Tell the database's planner what the record now holds. The backfill writes most of the table at once; until
    autovacuum next analyzes it, PostgreSQL plans the SLOs' window sums for a table of a few rows (a nested loop that
    filters a month of verdicts per mark: ~25 ms a window, the SLOs page's 16 windows ~200 ms, ~40 ms analyzed)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(RecordedSample._meta.db_table)}")


_RUNNING = threading.Lock()


def record_in_background() -> threading.Thread | None:
    """The embedded loop's call, every minute: record_telemetry and then the backfill (quick once done) on a thread
    of their own, so the loop's other work never waits on the first backfill; None when a run is still going."""
    if not recording_here() or not _RUNNING.acquire(blocking=False):
        return None

    def run() -> None:
        try:
            close_old_connections()
            now = time.time()
            record_telemetry(until=now)
            backfill(until=now)
            services.record_slo_blame(until=now)  # what the SLOs page shows beside the budgets, read from the record
        except Exception:  # logged; the next minute tries again
            logger.exception("Recording telemetry failed")
        finally:
            close_old_connections()
            _RUNNING.release()

    thread = threading.Thread(target=run, name="rackpilot-telemetry-recorder", daemon=True)
    thread.start()
    return thread
