"""The telemetry interface: one set of questions (GPU series, energy, tokens/s, p99), two sources that answer them.

- PrometheusTelemetry asks a real Prometheus over its HTTP API (/api/v1/query, /api/v1/query_range) for the series
  the exporters (dcgm-exporter, vLLM, or the simulator's) expose, with a timeout and a clear error naming the URL.
- SimulatorTelemetry (the embedded wiring: no Prometheus) reads the record apps.monitoring.recorder keeps of the same
  recorded series for the fleet and the long windows, and asks the simulator's model for small scopes.

Both compute the same things the same way: a gauge's value at each step; increase() and rate() of a counter over a
range; histogram_quantile over the rate of the buckets. So the same window gives the same figures from either.
"""

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import Avg, ExpressionWrapper, F, IntegerField, Max, Q, Sum
from django.utils import timezone

from apps.core.outbound import OutboundRefused, check_target
from apps.core.reads import kept_for_this_read
from apps.monitoring.models import RecordedSample
from apps.nodeexec import sim_telemetry as simulator
from apps.nodeexec.sim_telemetry import (
    INTEGRATION_STEP_S,
    LATENCY_BUCKETS,
    ServingRun,
    TrainingRun,
    Workloads,
    split_counters,
)
from apps.workloads.models import InferenceService, TrainingJob

# Our names of GPU fields: (dcgm-exporter metric, the simulator reading's key).
GPU_FIELDS = {
    "util": ("DCGM_FI_DEV_GPU_UTIL", "util"),
    "sm_active": ("DCGM_FI_PROF_SM_ACTIVE", "sm_active"),
    "power": ("DCGM_FI_DEV_POWER_USAGE", "power_w"),
    "temperature": ("DCGM_FI_DEV_GPU_TEMP", "temperature_c"),
    "sm_clock": ("DCGM_FI_DEV_SM_CLOCK", "sm_mhz"),
    "mem_clock": ("DCGM_FI_DEV_MEM_CLOCK", "mem_mhz"),
    "clock_reasons": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "reasons"),
    "xid": ("DCGM_FI_DEV_XID_ERRORS", "xid"),
    "ecc_dbe": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe"),
    "power_limit": ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w"),
    "remap_pending": ("DCGM_FI_DEV_ROW_REMAP_PENDING", "remap_pending"),
    "remap_failure": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "remap_failure"),
    "pcie_gen": ("DCGM_FI_DEV_PCIE_LINK_GEN", "pcie_gen"),
    "pcie_width": ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "pcie_width"),
    "pcie_max_gen": ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "pcie_max_gen"),
    "pcie_max_width": ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "pcie_max_width"),
}
ENERGY_METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ
# node_exporter's series of a node's network devices (by `device`, the interface name the inventory's NIC has): the link
# rate (netclass), the frames received and the receive errors (netdev: CRC/FCS and symbol errors among them).
NIC_SPEED_METRIC = "node_network_speed_bytes"
NIC_FRAMES_METRIC = "node_network_receive_packets_total"
NIC_ERRORS_METRIC = "node_network_receive_errs_total"
NIC_COUNTERS_RANGE_S = 300  # the errors are judged per million frames over the last 5 minutes
# dcgm-exporter's NVLink link state, one series per GPU and link (label `nvlink`): NVML's 1 active, 0 inactive. A
# link-level field, not in default-counters.csv: the exporter's CSV must list it for the watch to see links down.
NVLINK_STATE_METRIC = "DCGM_FI_DEV_NVLINK_GET_STATE"
# A rack-scale tray's IMEX daemon status (nvidia-imex-ctl -q: 5 READY, 7 UNAVAILABLE): not in default-counters.csv.
IMEX_DAEMON_METRIC = "DCGM_FI_IMEX_DAEMON_STATUS"
TOKENS_METRIC = "vllm:generation_tokens_total"
E2E_BUCKETS_METRIC = "vllm:e2e_request_latency_seconds_bucket"
WINDOWS = {"1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400}
POINTS_PER_WINDOW = 60
MIN_RATE_RANGE_S = 60  # rate() over at least four scrapes at Prometheus's usual 15 s
JOULES_PER_KWH = 3.6e6
SLO_PACK = 10_000_000  # see PrometheusTelemetry.slo_counts
LONG_SPAN_S = 3600  # SimulatorTelemetry.generated_tokens integrates the rate past an hour
RECORDED_FROM_S = 86_400  # windows this long or longer read the recorded series (telemetry_rules) where they cover
RECORDING_INTERVAL_S = 60
RECORDED_RATE_RANGE = "5m"
# The fleet's GPU panels, recorded every minute: (field, aggregate) -> the recorded series.
RECORDED_FLEET = {
    ("util", "avg"): "rackpilot:gpu_util:avg",
    ("sm_active", "avg"): "rackpilot:gpu_sm_active:avg",
    ("power", "sum"): "rackpilot:gpu_power_watts:sum",
    ("xid", "max"): "rackpilot:gpu_xid:max",
}
RECORDED_TOKENS = f"rackpilot:vllm_generation_tokens:rate{RECORDED_RATE_RANGE}"
RECORDED_E2E_BUCKETS = f"rackpilot:vllm_e2e_request_latency_seconds_bucket:rate{RECORDED_RATE_RANGE}"
# Each service's p99 end-to-end latency every minute (the quantile of the 5-minute bucket rates, as the latency SLO
# judges it): a window's worst p99 is the worst of these, whatever the window's step.
RECORDED_E2E_P99 = f"rackpilot:vllm_e2e_request_latency_seconds:p99_rate{RECORDED_RATE_RANGE}"
# The same bucket rates every 5 minutes (a rate over 5 min each: they tile the time), for steps of an hour or more:
# the p99 of a 30-day chart then reads 144 samples of each of the ~17 buckets a 12 h step instead of 720.
COARSE_INTERVAL_S = 300
COARSE_FROM_S = 3600
RECORDED_E2E_BUCKETS_COARSE = f"{RECORDED_E2E_BUCKETS}_every5m"
# The fleet's GPU energy in joules over each 5 minutes (increase() over 5 min every 5 min: the tiles add up to the
# window's energy, resets handled): a month of it is 8,640 samples of one series, where the counters' difference
# between the window's ends matches 256 GPUs' series (~100 ms at 30 d).
RECORDED_FLEET_ENERGY = "rackpilot:gpu_energy_joules:increase5m"
# Each node's busy GPU-seconds (its GPUs' SM-active integral) over each 5 minutes: the tiles add up to any window's,
# so the GPU-hours split of the fleet reads one sample a node a tile instead of every GPU's samples (or, embedded, a
# model of every node). A day of 512 nodes is 147,456 samples at most (an idle node's zeros are not kept, embedded).
RECORDED_NODE_BUSY = "rackpilot:gpu_sm_active_seconds:sum5m"
# The GPUs whose XID or double-bit ECC reading is not 0, recorded at every scrape, and a constant the same group
# records (that it runs at all): the fleet's health then reads the few series left (none on a healthy fleet) instead
# of every GPU's latest sample (~300 ms of Prometheus's time at 16,000 GPUs, a request), a scrape later at most.
RECORDED_NONZERO = {"xid": "rackpilot:gpu_xid:nonzero", "ecc_dbe": "rackpilot:gpu_ecc_dbe:nonzero"}
RECORDED_NONZERO_RAN = "rackpilot:gpu_faults:evaluated"
NONZERO_INTERVAL_S = 15  # docker/prometheus.yml's scrape_interval
BUSY_RECORDED_FOR_S = 86_400  # the backfill records the busy tiles of the dashboard's 24 h; the minute runs go on
TILES_FROM_S = 3600  # windows this long or longer read the 5-minute tiles (energy, busy; their edges on the 5 minutes)


def _bucket_rates() -> str:
    return f"sum by (service, le) (rate({E2E_BUCKETS_METRIC}[{RECORDED_RATE_RANGE}]))"


def _p99() -> str:
    return f"histogram_quantile(0.99, {_bucket_rates()})"


def _first_tile(recorded: str, held: int) -> str:
    """The samples of a 5-minute tile rule in the first 5 minutes of the last `held` seconds of a window (asked at its
    end; `held` more than 5 minutes): none where the rule did not run from then, so that its tiles add up to less than
    the raw samples of the window would."""
    return f"count_over_time({recorded}[{COARSE_INTERVAL_S}s] offset {held - COARSE_INTERVAL_S}s)"


def _node_busy(selector: str, seconds: int) -> str:
    """Each node's busy GPU-seconds over the `seconds` before: its GPUs' mean SM active times the span, summed."""
    return f"sum by (Hostname) (avg_over_time({selector}[{seconds}s])) * {seconds}"


def telemetry_rules() -> list[dict]:
    """The recording rule groups the long windows read: the fleet's GPU means, sums and maxima, and each service's
    token rate, latency-bucket rates (5 min) and the p99 of those, every minute; the bucket rates again every 5
    minutes. A month of the fleet's panels then reads one series a panel, a minute apart, instead of every GPU's
    samples at 15 s; a window's worst p99 is the worst minute's, not the worst of its steps.
    (promtool cannot backfill a rule that reads another's series, so each reads the exporters' own.)"""
    rules = [
        {"record": recorded, "expr": f"{how}({GPU_FIELDS[field][0]})"}
        for (field, how), recorded in RECORDED_FLEET.items()
    ]
    rules += [
        {"record": RECORDED_TOKENS, "expr": f"sum by (service) (rate({TOKENS_METRIC}[{RECORDED_RATE_RANGE}]))"},
        {"record": RECORDED_E2E_BUCKETS, "expr": _bucket_rates()},
        {"record": RECORDED_E2E_P99, "expr": _p99()},
    ]
    nonzero = [
        {"record": recorded, "expr": f"{GPU_FIELDS[name][0]} != 0"} for name, recorded in RECORDED_NONZERO.items()
    ]
    nonzero.append({"record": RECORDED_NONZERO_RAN, "expr": "vector(1)"})  # costs nothing, unlike count() of each
    return [
        {"name": "rackpilot-telemetry-recording", "interval": f"{RECORDING_INTERVAL_S}s", "rules": rules},
        {"name": "rackpilot-gpu-faults", "interval": f"{NONZERO_INTERVAL_S}s", "rules": nonzero},
        {
            "name": "rackpilot-telemetry-recording-5m",
            "interval": f"{COARSE_INTERVAL_S}s",
            "rules": [
                {"record": RECORDED_E2E_BUCKETS_COARSE, "expr": _bucket_rates()},
                {"record": RECORDED_FLEET_ENERGY, "expr": f"sum(increase({ENERGY_METRIC}[5m])) / 1000"},
                {"record": RECORDED_NODE_BUSY, "expr": _node_busy(f"{GPU_FIELDS['sm_active'][0]}", COARSE_INTERVAL_S)},
            ],
        },
    ]


class Latest(NamedTuple):
    """A recorded SLI's newest value (None: nothing to judge in the hour)."""

    value: float | None


class Worst(NamedTuple):
    """A window's worst p99 in seconds (None: no request in it) and how far apart the p99s it is the worst of are:
    RECORDING_INTERVAL_S where the minute record covers the window, else the window's step."""

    value: float | None
    every: float


class TelemetryError(Exception):
    """Telemetry could not be read; the message is for the page ("could not reach Prometheus at ...")."""


@dataclass(frozen=True)
class Window:
    """[end - span, end] in steps; a rate at t is taken over [t - rate_range, t]."""

    end: float
    span: float
    step: float
    rate_range: float

    @classmethod
    def named(cls, name: str, *, end: float | None = None, min_rate_range: float = MIN_RATE_RANGE_S) -> "Window":
        span = WINDOWS[name]
        step = span / POINTS_PER_WINDOW
        end = math.floor((timezone.now().timestamp() if end is None else end) / step) * step  # aligned: two pages agree
        return cls(end=end, span=span, step=step, rate_range=max(step, min_rate_range))

    @property
    def start(self) -> float:
        return self.end - self.span

    def times(self) -> list[float]:
        count = int(round(self.span / self.step))
        return [self.start + k * self.step for k in range(count + 1)]


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    points: list[tuple[float, float]] | tuple[tuple[float, float], ...] = field(default_factory=list)

    def values(self) -> list[float]:
        return [value for _, value in self.points]


def histogram_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's histogram_quantile on (upper bound, cumulative count) pairs, +Inf last: linear within a bucket."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0 or len(buckets) < 2:
        return math.nan
    rank = quantile * total
    lower_bound, lower_count = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower_bound  # past the highest finite bucket: its bound
            return lower_bound + (upper - lower_bound) * (rank - lower_count) / max(count - lower_count, 1e-12)
        lower_bound, lower_count = upper, count
    return lower_bound


class Telemetry(ABC):
    """The questions pages ask. Host names and service names come from the inventory and workloads."""

    source = ""

    @abstractmethod
    def gpu_series(self, field: str, *, hostnames: list[str], window: Window, aggregate: str = "") -> list[Series]:
        """One series per GPU (labels Hostname and gpu), or one for all of them with aggregate "avg" / "sum" / "max"."""

    @abstractmethod
    def energy_joules(self, *, hostnames: list[str], start: float, end: float) -> float:
        """Energy the nodes' GPUs used over [start, end], from their energy counters."""

    @abstractmethod
    def tokens_per_second(self, *, service: str, window: Window) -> Series:
        """Generated tokens per second of a service at each step (rate over the window's rate range)."""

    @abstractmethod
    def p99_latency_seconds(self, *, service: str, window: Window) -> Series:
        """p99 end-to-end request latency at each step, from the histogram's buckets."""

    def worst_p99_latency_seconds(self, *, service: str, window: Window) -> Worst:
        """The worst p99 end-to-end latency of the window: the highest of the p99s recorded each minute in
        (start, end] (RECORDED_E2E_P99, each over the 5 minutes before its minute), where the record covers the
        window; else (nothing recorded, or recorded only from within the window) the highest of p99_latency_seconds'
        steps, which over a long window stand for longer stretches and can read lower."""
        values = self.p99_latency_seconds(service=service, window=window).values()
        return Worst(max(values) if values else None, window.step)

    @abstractmethod
    def generated_tokens(self, *, service: str, start: float, end: float) -> float:
        """Tokens a service generated over [start, end] (counter resets handled)."""

    @abstractmethod
    def sm_active_seconds(self, *, hostnames: list[str], start: float, end: float) -> dict[tuple[str, str], float]:
        """Per GPU (Hostname, gpu) that reported in [start, end]: ∫ SM active dt, in seconds (busy GPU-seconds)."""

    def gpu_series_of(self, fields: tuple[str, ...], *, hostnames: list[str], window: Window) -> dict[str, list]:
        """gpu_series of each field (per GPU), by field: a source may read them together."""
        return {name: self.gpu_series(name, hostnames=hostnames, window=window) for name in fields}

    def gpu_means(
        self, fields: tuple[str, ...], *, hostnames: list[str], window: Window
    ) -> dict[str, dict[tuple[str, str], float]]:
        """Each GPU's mean of each field over the window's steps, by field then (Hostname, gpu); a GPU without a value
        in the window is left out. A source that can average where the samples are sends the means alone."""
        means: dict[str, dict[tuple[str, str], float]] = {}
        for name, series_list in self.gpu_series_of(fields, hostnames=hostnames, window=window).items():
            means[name] = {}
            for series in series_list:
                values = [value for value in series.values() if not math.isnan(value)]
                gpu = _gpu_key(series.labels)
                if values:
                    means[name][gpu] = sum(values) / len(values)
        return means

    def node_busy_seconds(self, *, hostnames: list[str], start: float, end: float) -> dict[str, float]:
        """Per node (Hostname): its GPUs' busy GPU-seconds over [start, end] (sm_active_seconds summed over the node's
        GPUs). A source that records them (RECORDED_NODE_BUSY) reads the 5-minute tiles of a window they cover."""
        busy: dict[str, float] = {}
        for (hostname, _), seconds in self.sm_active_seconds(hostnames=hostnames, start=start, end=end).items():
            busy[hostname] = busy.get(hostname, 0.0) + seconds
        return busy

    def fleet_series(self, field: str, aggregate: str, *, hostnames: list[str], window: Window) -> list[Series]:
        """gpu_series aggregated over the whole fleet (`hostnames` are every GPU node): a source that records the
        fleet's panels may read them from there."""
        return self.gpu_series(field, hostnames=hostnames, window=window, aggregate=aggregate)

    def fleet_energy_joules(self, *, hostnames: list[str], start: float, end: float) -> float:
        """energy_joules of the whole fleet (`hostnames` are every GPU node): a source that records it may read that."""
        return self.energy_joules(hostnames=hostnames, start=start, end=end)

    def gpu_values_at(
        self, field: str, *, hostnames: list[str], at: float, nonzero: bool = False
    ) -> dict[tuple[str, str], float]:
        """(Hostname, gpu) -> the field's value at `at`, for the GPUs that report one: an instant's reading.
        `nonzero`: only the GPUs whose value is not 0 (a fleet's XID and ECC readings are nearly all 0)."""
        window = Window(end=at, span=0, step=60, rate_range=60)
        return {
            (one.labels["Hostname"], one.labels["gpu"]): one.values()[-1]
            for one in self.gpu_series(field, hostnames=hostnames, window=window)
            if one.points and (one.values()[-1] or not nonzero)
        }

    def gpu_values_now(self, fields: tuple[str, ...], *, hostnames: list[str], at: float) -> dict[str, dict]:
        """gpu_values_at of each field at `at`, by field: the newest reading, for a watch that must see a fault as
        soon as the exporters show it (a source may read the fields together, or read them live)."""
        questions = {name: partial(self.gpu_values_at, name, hostnames=hostnames, at=at) for name in fields}
        return self.gather(questions)

    @abstractmethod
    def nic_values_now(self, *, hostnames: list[str], at: float) -> dict[tuple[str, str], dict]:
        """(hostname, NIC name) -> `speed_gbps` (its link rate now; None: link down, no rate), `frames` and `errors`
        (the receive counters' increase over the NIC_COUNTERS_RANGE_S before `at`), for the NICs that report."""

    @abstractmethod
    def nvlink_values_now(self, *, hostnames: list[str], at: float) -> dict[tuple[str, str], dict]:
        """(hostname, GPU index) -> `links` (how many links the GPU reports) and `down` (the indexes of those
        inactive, sorted), for the GPUs that report their links' state at `at`."""

    @abstractmethod
    def imex_values_now(self, *, hostnames: list[str], at: float) -> dict[str, int]:
        """hostname -> its IMEX daemon status at `at`, for the hosts that report one (the trays of a rack-scale
        domain)."""

    def gather(self, questions: dict) -> dict:
        """Each question (a callable without arguments, asking this source only: no database) answered, by key. A
        source whose questions wait on a server asks them at once."""
        return {key: question() for key, question in questions.items()}

    def recorded_slo_counts(self, *, slos: list[str], span: float, end: float) -> dict[str, tuple[int, int]]:
        """SLO name -> (judged, met) over the window from recorded rules (Prometheus's rackpilot:slo_good), for each
        of `slos` whose record covers the window, all in one question; an SLO left out is not recorded (the caller
        counts it from its criterion)."""
        return {}

    def recorded_slo_latest(self, *, slo: str, end: float) -> "Latest | None":
        """The SLI's newest recorded value in the hour before `end` (rackpilot:slo_value); None: not recorded (the
        caller works it out from the SLI's series)."""
        return None

    def slo_counts(self, *, good_expression: str, span: float, resolution: int, end: float) -> tuple[int, int] | None:
        """(steps judged, steps met) of an SLO's good-expression over [end - span, end] at `resolution` seconds, when
        the source can count them itself (Prometheus's range functions over a subquery); None: judge step by step."""
        return None

    def energy_per_million_tokens_kwh(self, *, service: InferenceService, start: float, end: float) -> float | None:
        """Energy of the service's nodes over generated tokens, in kWh per million tokens; None without tokens."""
        hostnames = [node.hostname for node in service.nodes.all()]
        tokens = self.generated_tokens(service=service.name, start=start, end=end)
        if tokens <= 0:
            return None
        return self.energy_joules(hostnames=hostnames, start=start, end=end) / JOULES_PER_KWH / (tokens / 1e6)


# --- the simulator, directly ------------------------------------------------------------------------------------


def current_workloads() -> Workloads:
    """The workloads that load the simulated GPUs, as the simulator's model takes them (it cannot read this app)."""

    def started(workload) -> float:
        moment = getattr(workload, "started_at", None) or workload.created
        return moment.timestamp()

    jobs = TrainingJob.objects.active().prefetch_related("members__node")
    services = InferenceService.objects.active().prefetch_related("nodes")
    return Workloads(
        training=tuple(
            TrainingRun(
                job.name,
                tuple(member.node.hostname for member in sorted(job.members.all(), key=lambda m: m.node_rank)),
                started(job),
            )
            for job in jobs
        ),
        serving=tuple(
            ServingRun(
                service.name,
                service.model,
                tuple(service.serving_hostnames()),
                float(service.design_tokens_per_second),
                started(service),
                sized_for=len(service.nodes.all()),
            )
            for service in services
        ),
    )


class TelemetryPending(TelemetryError):
    """The record does not cover the window yet (the backfill is still at it): the page says how far it is."""

    def __init__(self, share: float):
        self.share = share
        super().__init__(f"telemetry being recorded: {int(share * 100)} %")


MARK = "rackpilot:recorded"  # apps.monitoring.recorder's marks: one row per recorded time and part
MINUTE_PART, BUCKETS_PART, ENERGY_PART, BUSY_PART = "part=1m", "part=5m", "part=energy", "part=busy"
SLO_GOOD = "rackpilot:slo_good"
SLO_VALUE = "rackpilot:slo_value"  # the SLI's value at each recorded minute, where it has one (finite)
LOOKBACK_S = 300  # Prometheus' lookback delta: a range query's step finds the newest sample this far back


def _on_grid(window: Window) -> list[int] | None:
    """The window's times as whole seconds when they fall on the minute recording's grid (a named window's do)."""
    times = window.times()
    if any(t % RECORDING_INTERVAL_S for t in times):
        return None
    return [int(t) for t in times]


def _samples():
    return RecordedSample.objects


# The backfill judges the SLOs over the longest window on this grid too (recorder.backfill_times): 168-minute steps
# pass through every 24 minutes of the day within a week, where the 30-day window's own 12-hour steps see the same two
# times of day every day (a daily peak's misses never sampled). A recorded verdict stands for at most this long.
SLO_SPREAD_STEP_S = WINDOWS["7d"] // POINTS_PER_WINDOW
SLO_STEP_CAP_S = SLO_SPREAD_STEP_S


def _verdict_seconds(slos: list[str], *, start: int, end: int) -> dict[str, tuple[float, float]]:
    """SLO name -> (judged, met) seconds over (start, end]: each recorded verdict weighs the time since the minute
    part recorded before it (from `start` for the first), at most SLO_STEP_CAP_S. One query for all the SLOs (the
    weights are the minutes', whichever SLO was judged in them); the database works the gaps out (LAG), so a month
    of minutes never travels. An SLO without a verdict in the window counts nothing."""
    if not slos:
        return {}
    table = RecordedSample._meta.db_table
    each = ", ".join(["%s"] * len(slos))
    sql = f"""
        SELECT verdict.labels, SUM(marks.weight), SUM(marks.weight * verdict.value)
        FROM (
            SELECT time, CASE WHEN gap > %s THEN %s ELSE gap END AS weight
            FROM (
                SELECT time, time - COALESCE(LAG(time) OVER (ORDER BY time), %s) AS gap
                FROM {table} WHERE series = %s AND labels = %s AND time > %s AND time <= %s
            ) AS gaps
        ) AS marks
        JOIN {table} AS verdict ON verdict.series = %s AND verdict.labels IN ({each}) AND verdict.time = marks.time
        GROUP BY verdict.labels
    """  # noqa: S608 (the table's name is the model's, the placeholders counted; every value is a parameter)
    labels = {f"slo={slo}": slo for slo in slos}  # by the whole labels: an SLO's name may hold a comma
    params = [SLO_STEP_CAP_S, SLO_STEP_CAP_S, start, MARK, MINUTE_PART, start, end, SLO_GOOD, *labels]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        counted = {labels[row[0]]: (float(row[1]), float(row[2])) for row in cursor.fetchall()}
    return {slo: counted.get(slo, (0.0, 0.0)) for slo in slos}


class SimulatorTelemetry(Telemetry):
    """The simulator's telemetry. The fleet's questions and the long windows read the record the embedded wiring
    keeps (apps.monitoring.recorder: RecordedSample rows, what Prometheus' recording rules keep), with the arithmetic
    PrometheusTelemetry applies to its recorded series; a window the record does not cover yet raises
    TelemetryPending. Small scopes (one node's GPUs, one service over a short window) are worked out from a model of
    just the nodes they need, each time."""

    source = "simulator"

    def __init__(self, *, seed: int | None = None):
        self.seed = settings.RACKPILOT_SIM_SEED if seed is None else seed
        self._workloads: Workloads | None = None
        self._models: dict[frozenset, object] = {}  # this object's (one read): nodes -> their model

    @property
    def workloads(self) -> Workloads:
        if self._workloads is None:
            self._workloads = current_workloads()
        return self._workloads

    def _model(self, hostnames) -> object:
        """A model of these nodes and their workloads' other nodes (a job runs at its slowest rank's pace, a
        service's capacity is its nodes')."""
        needed = set(hostnames)
        for run in (*self.workloads.training, *self.workloads.serving):
            if needed & set(run.hostnames):
                needed |= set(run.hostnames)
        key = frozenset(needed)
        if key not in self._models:
            model = simulator.telemetry_model(workloads=self.workloads, seed=self.seed, hostnames=sorted(key))
            self._models[key] = model
        return self._models[key]

    # --- the record

    def _latest(self, series: str, labels: str, times: list[int]) -> dict[int, tuple[int, float]]:
        """At each time, the newest sample of the series at or before it within Prometheus' lookback (5 minutes): what
        a range query of a recorded series finds at its steps (the minute being recorded reads the one before)."""
        candidates = sorted({t - back for t in times for back in range(0, LOOKBACK_S, RECORDING_INTERVAL_S)})
        rows = dict(_samples().of(series, labels).filter(time__in=candidates).values_list("time", "value"))
        found = {}
        for t in times:
            for back in range(0, LOOKBACK_S, RECORDING_INTERVAL_S):
                if t - back in rows:
                    found[t] = (t - back, rows[t - back])
                    break
        return found

    def _require(self, times: list[int]) -> None:
        """TelemetryPending unless the minute recording (or the backfill) covers each of the times."""
        if not times:
            return
        covered = self._latest(MARK, MINUTE_PART, times)
        if len(covered) < len(times):
            raise TelemetryPending(len(covered) / len(times))

    def _at(self, series: str, labels: str, times: list[int]) -> list[tuple[float, float]]:
        """The recorded series at these times (a query_range of a recorded series at its own step)."""
        return [(float(t), value) for t, (_, value) in sorted(self._latest(series, labels, times).items())]

    def _step_means(self, series: str, service: str, window: Window) -> dict[str, dict[int, float]]:
        """avg_over_time(series[rate_range]) at each of the window's steps, per labels: the mean of the samples in
        (t - rate_range, t] (Prometheus 3's ranges, which leave the start out), per labels of the service's samples,
        worked out by the database."""
        start, step = int(window.start), int(window.step)
        low = start - int(window.rate_range)
        rows = (
            _samples()
            .filter(series=series, time__gt=low, time__lte=int(window.end))
            .filter(Q(labels=f"service={service}") | Q(labels__endswith=f",service={service}"))
            .annotate(k=ExpressionWrapper((F("time") - start + step - 1) / step, output_field=IntegerField()))
            .values("labels", "k")
            .annotate(mean=Avg("value"))
            .order_by()
        )
        means: dict[str, dict[int, float]] = {}
        for row in rows:
            means.setdefault(row["labels"], {})[start + row["k"] * step] = row["mean"]
        return means

    # --- the fleet: read from the record

    def fleet_series(self, field, aggregate, *, hostnames, window):
        recorded = RECORDED_FLEET.get((field, aggregate))
        times = _on_grid(window)
        if recorded is None or times is None:
            return self.gpu_series(field, hostnames=hostnames, window=window, aggregate=aggregate)
        self._require(times)
        return [Series({}, self._at(recorded, "", times))]

    def fleet_energy_joules(self, *, hostnames, start, end):
        # The recorded 5-minute tiles that end in (start, end]: the window's energy, its edges on the 5 minutes (the
        # newest tile may be still to come, as in Prometheus' sum_over_time).
        every = COARSE_INTERVAL_S
        tiles = [k * every for k in range(int(start // every) + 1, int(end // every) + 1)][:-1]
        if tiles:
            marks = _samples().of(MARK, ENERGY_PART).filter(time__gte=tiles[0], time__lte=tiles[-1])
            if marks.count() < len(tiles):
                raise TelemetryPending(marks.count() / len(tiles))
        recorded = _samples().of(RECORDED_FLEET_ENERGY).filter(time__gt=start, time__lte=end)
        return recorded.aggregate(joules=Sum("value"))["joules"] or 0.0

    def node_busy_seconds(self, *, hostnames, start, end):
        # The recorded 5-minute tiles that end in (start, end], where every one is recorded (the newest may be still
        # to come); a window the record does not cover (past the backfill's day, before the minute runs reached it)
        # is worked out from the model of every node, as before the record.
        every = COARSE_INTERVAL_S
        tiles = [k * every for k in range(int(start // every) + 1, int(end // every) + 1)][:-1]
        marks = _samples().of(MARK, BUSY_PART).filter(time__gte=tiles[0], time__lte=tiles[-1]) if tiles else None
        if end - start < TILES_FROM_S or marks is None or marks.count() < len(tiles):
            return super().node_busy_seconds(hostnames=hostnames, start=start, end=end)
        wanted = set(hostnames)
        rows = (
            _samples()
            .filter(series=RECORDED_NODE_BUSY, time__gt=start, time__lte=end)
            .values("labels")
            .annotate(seconds=Sum("value"))
            .order_by()
        )
        busy = {_label(row["labels"], "Hostname"): row["seconds"] for row in rows}
        return {hostname: seconds for hostname, seconds in busy.items() if hostname in wanted}

    def recorded_slo_latest(self, *, slo, end):
        """The newest recorded value of the SLI in the hour before `end` (None where no minute of it had one);
        TelemetryPending unless the minute at `end` is recorded."""
        self._require([int(end // RECORDING_INTERVAL_S * RECORDING_INTERVAL_S)])
        newest = (
            _samples().of(SLO_VALUE, f"slo={slo}").filter(time__gt=end - 3600, time__lte=end).order_by("-time").first()
        )
        return Latest(newest.value if newest is not None else None)

    def recorded_slo_counts(self, *, slos, span, end):
        """Each SLO's (judged, met) minutes over (end - span, end] from the recorded verdicts (rackpilot:slo_good), as
        PrometheusTelemetry counts its every-minute verdicts; TelemetryPending while the record does not cover the
        window's steps (those of its page grid, aligned to its step, and the minute at `end`). An SLO is judged from
        when it was first recorded: the steps before count as without data.

        Each verdict counts for the time it stands for: since the minute part recorded before it (one minute where
        the minute runs recorded every minute; a backfilled step's span where only the backfill did), at most
        SLO_STEP_CAP_S. Counting rows instead let the 30-day window's few backfilled steps weigh as much as the last
        hour's sixty minutes, and the misses of a shorter window all but vanish in it."""
        seconds = max(int(round(span)), 3600)
        step = seconds / POINTS_PER_WINDOW
        grid = _on_grid(Window(end=math.floor(end / step) * step, span=seconds, step=step, rate_range=60))
        minute = int(end // RECORDING_INTERVAL_S * RECORDING_INTERVAL_S)
        self._require(sorted({*(grid[1:] if grid else []), minute}))  # the window's start is left out
        counted = _verdict_seconds(slos, start=int(end - seconds), end=int(end))
        return {
            slo: (int(round(judged / RECORDING_INTERVAL_S)), int(round(good / RECORDING_INTERVAL_S)))
            for slo, (judged, good) in counted.items()
        }

    def _long_rates(self, series: str, service: str, window: Window) -> dict[str, dict[int, float]] | None:
        """The step means of a service's recorded rates over a long window (RECORDED_FROM_S and longer), by labels;
        None for a shorter window, or one off the minute grid (worked out instead)."""
        times = _on_grid(window)
        if window.span < RECORDED_FROM_S or times is None:
            return None
        self._require(times)
        return self._step_means(series, service, window)

    def tokens_per_second(self, *, service, window):
        means = self._long_rates(RECORDED_TOKENS, service, window)
        if means is None:
            return self._tokens_per_second(service, window)
        by_step = means.get(f"service={service}", {})
        return Series({"service": service}, [(float(t), by_step[t]) for t in sorted(by_step)])

    def p99_latency_seconds(self, *, service, window):
        means = None
        if window.rate_range >= COARSE_FROM_S:
            means = self._long_rates(RECORDED_E2E_BUCKETS_COARSE, service, window)
        if not means:
            means = self._long_rates(RECORDED_E2E_BUCKETS, service, window)
        if means is None:
            return self._p99_latency_seconds(service, window)
        by_step: dict[int, list[tuple[float, float]]] = {}
        for labels, values in means.items():
            bound = float(_label(labels, "le"))
            for t, rate in values.items():
                by_step.setdefault(t, []).append((bound, rate))
        points = []
        for t in sorted(by_step):
            value = histogram_quantile(0.99, by_step[t])
            if not math.isnan(value):
                points.append((float(t), value))
        return Series({"service": service}, points)

    def worst_p99_latency_seconds(self, *, service, window):
        # The highest recorded minute's p99 in (start, end], where every minute of the window is recorded and the p99s
        # were recorded through its first hour (a record kept before they were has the minutes without them).
        start, end, every = int(window.start), int(window.end), RECORDING_INTERVAL_S
        minutes = len(range(start // every + 1, end // every + 1))
        recorded = _samples().filter(series=RECORDED_E2E_P99, time__gt=start, time__lte=end)
        if (
            _samples().of(MARK, MINUTE_PART).filter(time__gt=start, time__lte=end).count() == minutes
            and recorded.filter(time__lte=start + 3600).exists()
        ):
            worst = recorded.filter(labels=f"service={service}").aggregate(worst=Max("value"))["worst"]
            return Worst(worst, every)
        return super().worst_p99_latency_seconds(service=service, window=window)

    def generated_tokens(self, *, service, start, end):
        if end - start >= RECORDED_FROM_S:
            # The recorded rate's samples (one a minute) times the minute, where every minute is recorded.
            every = RECORDING_INTERVAL_S
            minutes = [k * every for k in range(int(start // every) + 1, int(end // every) + 1)]
            marks = _samples().of(MARK, MINUTE_PART).filter(time__gt=start, time__lte=end)
            if marks.count() == len(minutes):
                recorded = _samples().of(RECORDED_TOKENS, f"service={service}")
                total = recorded.filter(time__gt=start, time__lte=end).aggregate(tokens=Sum("value"))["tokens"]
                return (total or 0.0) * RECORDING_INTERVAL_S
        return self._generated_tokens(service, start, end)

    def gpu_values_at(self, field, *, hostnames, at, nonzero=False):
        """XID and uncorrectable ECC errors from the record (every GPU that reported one, the minute at or before
        `at`: the others report 0); any other field worked out."""
        metric = GPU_FIELDS[field][0]
        if field not in ("xid", "ecc_dbe"):
            return super().gpu_values_at(field, hostnames=hostnames, at=at, nonzero=nonzero)
        minute = int(at // RECORDING_INTERVAL_S * RECORDING_INTERVAL_S)
        covered = self._latest(MARK, MINUTE_PART, [minute])
        if not covered:
            raise TelemetryPending(0.0)
        recorded, wanted = covered[minute][0], set(hostnames)
        values: dict[tuple[str, str], float] = {}
        for labels, value in _samples().filter(series=metric, time=recorded).values_list("labels", "value"):
            key = (_label(labels, "Hostname"), _label(labels, "gpu"))
            if key[0] in wanted and (value or not nonzero):
                values[key] = value
        return values

    def gpu_values_now(self, fields, *, hostnames, at):
        """Worked out from the model at `at` (one reading of each GPU for all the fields), not from the record: the
        minute recording writes a minute after it has passed, so a watch reading it saw a fault a minute or two
        late. A GPU off the bus reports its XID (79) alone, as dcgm-exporter shows it."""
        model = self._model(hostnames)
        keys = {name: GPU_FIELDS[name][1] for name in fields}
        values: dict[str, dict] = {name: {} for name in fields}
        for hostname in sorted(set(hostnames) & set(model.histories)):
            for index, reading in model.node_readings(hostname, at, keys=frozenset(keys.values())):
                for name, key in keys.items():
                    value = (79 if key == "xid" else None) if reading is None else reading[key]
                    if value is not None:
                        values[name][(hostname, str(index))] = float(value)
        return values

    def nic_values_now(self, *, hostnames, at):
        """Worked out from the model at `at`: the link's trained rate (a degraded cable's), the counters' growth
        since NIC_COUNTERS_RANGE_S before."""
        model = self._model(hostnames)
        values = {}
        for hostname in sorted(set(hostnames) & set(model.histories)):
            before = {nic["name"]: nic for nic in model.nic_readings(hostname, at - NIC_COUNTERS_RANGE_S)}
            for nic in model.nic_readings(hostname, at):
                earlier = before.get(nic["name"], nic)
                values[(hostname, nic["name"])] = {
                    "speed_gbps": float(nic["speed_gbps"]) if nic["link_up"] else None,
                    "frames": float(nic["rx_packets"] - earlier["rx_packets"]),
                    "errors": float(nic["rx_errors"] - earlier["rx_errors"]),
                }
        return values

    def nvlink_values_now(self, *, hostnames, at):
        """Worked out from the model at `at`: each GPU's links and those inactive."""
        model = self._model(hostnames)
        return {
            (hostname, str(index)): {"links": links, "down": down}
            for hostname in sorted(set(hostnames) & set(model.histories))
            for index, links, down in model.nvlink_readings(hostname, at)
        }

    def imex_values_now(self, *, hostnames, at):
        """Worked out from the model at `at`."""
        model = self._model(hostnames)
        statuses = {host: model.imex_daemon_status(host, at) for host in sorted(set(hostnames) & set(model.histories))}
        return {host: status for host, status in statuses.items() if status is not None}

    # --- small scopes: worked out from the model of the nodes they need

    def gpu_series(self, field, *, hostnames, window, aggregate=""):
        model = self._model(hostnames)
        per_gpu: list[Series] = []
        for hostname in hostnames:
            if hostname not in model.histories:
                continue
            for index, points in self._node_points(model, field, hostname, window):
                per_gpu.append(Series({"Hostname": hostname, "gpu": str(index)}, points))
        return _aggregate(per_gpu, aggregate)

    def gpu_series_of(self, fields, *, hostnames, window):
        # One reading of each GPU at each step for all the fields (the model's cost is the reading, not the keys).
        model = self._model(hostnames)
        series: dict[str, list[Series]] = {name: [] for name in fields}
        for hostname in hostnames:
            if hostname not in model.histories:
                continue
            for name, points in self._node_points_of(model, fields, hostname, window).items():
                for index, gpu_points in points:
                    series[name].append(Series({"Hostname": hostname, "gpu": str(index)}, gpu_points))
        return series

    def _node_points(self, model, field: str, hostname: str, window: Window) -> list[tuple[int, list]]:
        """(GPU index, its (t, value) points) of the node's GPUs that have a value in the window, by index."""
        return self._node_points_of(model, (field,), hostname, window)[field]

    def _node_points_of(self, model, fields, hostname: str, window: Window) -> dict[str, list[tuple[int, list]]]:
        """_node_points of each field, the GPUs read once a step."""
        keys = {name: GPU_FIELDS[name][1] for name in fields}
        per_gpu: dict[str, dict[int, list]] = {name: {} for name in fields}
        for t in window.times():
            for index, reading in model.node_readings(hostname, t, keys=frozenset(keys.values())):
                for name, key in keys.items():
                    value = (79 if key == "xid" else None) if reading is None else reading[key]
                    if value is not None:
                        per_gpu[name].setdefault(index, []).append((t, float(value)))
        return {name: sorted(points.items()) for name, points in per_gpu.items()}

    def energy_joules(self, *, hostnames, start, end):
        model = self._model(hostnames)
        total = 0.0
        for hostname in hostnames:
            if hostname not in model.histories:
                continue
            # The counter's increase, as Prometheus's increase() takes it (the counter starts at the node's boot).
            booted = model.histories[hostname].booted
            for gpu, regime in model.node_regime(hostname, end).gpus:
                if regime.present:
                    total += model.energy_j(hostname, gpu.index, max(start, booted), max(end, booted))
        return total

    def sm_active_seconds(self, *, hostnames, start, end):
        model = self._model(hostnames)
        seconds = {}
        for hostname in hostnames:
            if hostname not in model.histories:
                continue
            busy = model.sm_active_seconds(hostname, start, end)
            # A card reports while it is on the bus at some point of the window (Prometheus has its series then).
            present = {
                gpu.index
                for moment in (start, end)
                for gpu, regime in model.node_regime(hostname, moment).gpus
                if regime.present
            }
            for index in sorted(present):
                seconds[(hostname, str(index))] = busy
        return seconds

    def _run(self, service: str) -> ServingRun | None:
        return next((run for run in self.workloads.serving if run.name == service), None)

    def _tokens_per_second(self, service: str, window: Window) -> Series:
        run = self._run(service)
        series = Series({"service": service})
        if run is None:
            return series
        model, step = self._model(run.hostnames), _integration_step(window)
        for t in window.times():
            start = t - window.rate_range
            tokens = model.service_tokens(run, start, t, step=step) + model.served_tokens(run, start, t)
            series.points.append((t, tokens / window.rate_range))
        return series

    def _p99_latency_seconds(self, service: str, window: Window) -> Series:
        run = self._run(service)
        series = Series({"service": service})
        if run is None:
            return series
        model = self._model(run.hostnames)
        for t in window.times():
            parts = split_counters(model.service_totals(run, t - window.rate_range, t, step=_integration_step(window)))
            buckets = list(zip(LATENCY_BUCKETS, parts["e2e_buckets"], strict=True)) + [(math.inf, parts["requests"])]
            value = histogram_quantile(0.99, buckets)
            if not math.isnan(value):
                series.points.append((t, value))
        return series

    def _generated_tokens(self, service: str, start: float, end: float) -> float:
        run = self._run(service)
        if run is None:
            return 0.0
        model = self._model(run.hostnames)
        if end - start > LONG_SPAN_S:
            # Over hours, what increase() comes to: the integral of the rate (a restart's reset counted from zero
            # loses at most a scrape's worth of tokens), in 720 pieces rather than the counter minute by minute.
            return model.service_tokens(run, start, end, step=max(INTEGRATION_STEP_S, (end - start) / 720))
        # The counter as the service exposes it, sampled each minute, and its increase as Prometheus takes it: a
        # daily restart between two samples resets it, so that piece counts from the restart only. Each piece is the
        # rate's integral (what the counter's difference is), without the latency histograms the counter carries.
        step = max(60.0, (end - start) / 2000)
        times = [start + k * step for k in range(int((end - start) // step) + 1)] + [end]
        total = 0.0
        for a, b in zip(times, times[1:], strict=False):
            since = max(a, model.restarted(run, b))
            total += model.service_tokens(run, since, b) + model.served_tokens(run, since, b)
        return total


def _label(labels: str, name: str) -> str:
    """One label's value from a recorded sample's labels ('name=value,...')."""
    for pair in labels.split(","):
        key, _, value = pair.partition("=")
        if key == name:
            return value
    return ""


def _integration_step(window: Window) -> float:
    """Fine enough for a rate range (60 pieces of it), never finer than the model's own 10 s."""
    return max(INTEGRATION_STEP_S, window.rate_range / 60)


def _aggregate(series: list[Series], how: str) -> list[Series]:
    if not how or not series:
        return series
    by_time: dict[float, list[float]] = {}
    for one in series:
        for t, value in one.points:
            by_time.setdefault(t, []).append(value)
    combine = {"avg": lambda values: sum(values) / len(values), "sum": sum, "max": max}[how]
    return [Series({}, [(t, combine(values)) for t, values in sorted(by_time.items())])]


# --- Prometheus -------------------------------------------------------------------------------------------------


def check_prometheus_url(url: str, *, allow_link_local: bool = False) -> str:
    """The URL if Rackpilot may call it; TelemetryError naming the setting otherwise (not http(s), or link-local or
    cloud metadata addresses, which an outbound call must never reach unless allowed)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise TelemetryError(
            f"RACKPILOT_PROMETHEUS_URL must be an http(s) URL such as http://127.0.0.1:9090, not {url!r}"
        )
    if allow_link_local:
        return url.rstrip("/")
    try:
        check_target(parsed.hostname)  # the outbound guard every outbound call goes through (apps/core/outbound.py)
    except OutboundRefused as refused:
        raise TelemetryError(
            f"RACKPILOT_PROMETHEUS_URL points at a link-local or metadata address: {refused}; "
            "set RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL=true if that is really your Prometheus"
        ) from refused
    return url.rstrip("/")


NAME = re.compile(r"^[^\x00-\x1f\x7f]+\Z")


def _string(value: str) -> str:
    """A PromQL string literal (inventory names are printable; quotes and backslashes are escaped)."""
    if not NAME.match(value):
        raise TelemetryError(f"not a name Prometheus can be asked about: {value!r}")
    return json.dumps(value)


def _any_of(values: list[str]) -> str:
    """A regular expression matching exactly these values, as a PromQL string."""
    return _string("|".join(re.escape(value) for value in values) or "^$")


def _on_hosts(metric: str, hostnames: list[str]) -> str:
    """The metric's series of these hosts (dcgm-exporter's `Hostname` label), as a PromQL selector."""
    return f"{metric}{{Hostname=~{_any_of(hostnames)}}}"


def _gpu_key(labels: Mapping) -> tuple[str, str]:
    """(Hostname, gpu) of a GPU's series, from its labels."""
    return labels.get("Hostname", ""), labels.get("gpu", "")


CONCURRENT_QUERIES = 8
T = TypeVar("T")
LOWEST_TIMESTAMP = re.compile(r"^prometheus_tsdb_lowest_timestamp_seconds (\S+)$", re.MULTILINE)


class PrometheusTelemetry(Telemetry):
    source = "prometheus"

    def __init__(self, url: str, *, timeout: float = 5.0, allow_link_local: bool = False):
        self.url = check_prometheus_url(url, allow_link_local=allow_link_local)
        self.timeout = timeout
        self._samples_begin: float | None = None

    def samples_begin(self, *, end: float) -> float:
        """When Prometheus's stored samples begin (its own gauge prometheus_tsdb_lowest_timestamp_seconds, on its
        /metrics), at most `end`; 0 where it does not say (nothing is then known to be missing). Asked once."""
        if self._samples_begin is None:
            self._samples_begin = 0.0
            try:
                with urllib.request.urlopen(f"{self.url}/metrics", timeout=self.timeout) as response:  # noqa: S310
                    found = LOWEST_TIMESTAMP.search(response.read().decode(errors="replace"))
            except (OSError, ValueError):
                found = None
            if found:
                self._samples_begin = float(found[1])
        return min(self._samples_begin, end)

    def _held(self, seconds: int, end: float) -> int:
        """Of the `seconds` before `end`, how many Prometheus holds samples of (a Prometheus younger than the window
        holds its last part only: the raw samples judge nothing before either)."""
        return min(seconds, max(int(end - self.samples_begin(end=end)), 0))

    def _from_record(self, seconds: int, end: float, ask: Callable[[int], T | None], *, shortest: int = 0) -> T | None:
        """What `ask(held)` answers from recorded series standing for the last `held` seconds before `end`: None where
        the first part of those is not recorded (the caller reads the raw samples). Asked of the whole window first;
        where that is not recorded and Prometheus holds less of it than the window, and more than `shortest`, of what
        it holds (a Prometheus younger than the window: its raw samples judge nothing before either). So its lowest
        timestamp (its /metrics, ~15 ms of its time a request at a fleet's size) is read only for a young Prometheus
        or a record that does not cover the window."""
        answer = ask(seconds)
        if answer is None and shortest < (held := self._held(seconds, end)) < seconds:
            answer = ask(held)
        return answer

    def _get(self, path: str, params: dict) -> list:
        address = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as response:  # noqa: S310 (checked above)
                body = json.load(response)
        except urllib.error.HTTPError as error:
            try:
                body = json.load(error)
            except (ValueError, OSError):
                raise TelemetryError(f"Prometheus at {self.url} answered HTTP {error.code}") from None
        except (OSError, ValueError) as error:
            raise TelemetryError(f"could not reach Prometheus at {self.url}: {error}") from None
        if body.get("status") != "success":
            raise TelemetryError(
                f"Prometheus at {self.url} refused the query: {body.get('errorType', '')} {body.get('error', '')}"
            )
        return body["data"]["result"]

    def query(self, promql: str, *, at: float) -> list:
        return self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})

    def query_range(self, promql: str, window: Window) -> list[Series]:
        result = self._get(
            "/api/v1/query_range",
            {"query": promql, "start": f"{window.start:.3f}", "end": f"{window.end:.3f}", "step": f"{window.step:g}"},
        )
        return [
            Series(
                {key: value for key, value in item["metric"].items() if key != "__name__"},
                [(float(t), float(value)) for t, value in item["values"]],
            )
            for item in result
        ]

    def gather(self, questions):
        if len(questions) < 2:
            return super().gather(questions)
        with ThreadPoolExecutor(max_workers=min(len(questions), CONCURRENT_QUERIES)) as pool:
            futures = {key: pool.submit(question) for key, question in questions.items()}
            return {key: future.result() for key, future in futures.items()}

    def nic_values_now(self, *, hostnames, at):
        """The latest scrape of node_exporter's series (the `node` label its targets carry names the host)."""
        selector = f"{{node=~{_any_of(hostnames)}}}"
        window = f"[{NIC_COUNTERS_RANGE_S}s]"
        answers = self.gather(
            {
                "speed_gbps": partial(self.query, f"{NIC_SPEED_METRIC}{selector} * 8 / 1e9", at=at),
                "frames": partial(self.query, f"increase({NIC_FRAMES_METRIC}{selector}{window})", at=at),
                "errors": partial(self.query, f"increase({NIC_ERRORS_METRIC}{selector}{window})", at=at),
            }
        )
        values: dict[tuple[str, str], dict] = {}
        for name in ("speed_gbps", "frames", "errors"):
            for item in answers[name]:
                key = (item["metric"].get("node", ""), item["metric"].get("device", ""))
                values.setdefault(key, {"speed_gbps": None, "frames": 0.0, "errors": 0.0})[name] = float(
                    item["value"][1]
                )
        return values

    def nvlink_values_now(self, *, hostnames, at):
        """The latest scrape of the per-link state series of the GPUs of these hosts."""
        values: dict[tuple[str, str], dict] = {}
        for item in self.query(_on_hosts(NVLINK_STATE_METRIC, hostnames), at=at):
            labels = item["metric"]
            gpu = values.setdefault(_gpu_key(labels), {"links": 0, "down": []})
            gpu["links"] += 1
            if float(item["value"][1]) == 0 and labels.get("nvlink", "").isdigit():
                gpu["down"].append(int(labels["nvlink"]))
        for gpu in values.values():
            gpu["down"].sort()
        return values

    def imex_values_now(self, *, hostnames, at):
        """The latest scrape, one value per host (an exporter that repeats it on each GPU's series repeats the same)."""
        selector = _on_hosts(IMEX_DAEMON_METRIC, hostnames)
        answer = self.query(f"max by (Hostname) ({selector})", at=at)
        return {item["metric"].get("Hostname", ""): int(float(item["value"][1])) for item in answer}

    def _recorded_range(self, promql: str, window: Window, *, shortest: int = RECORDED_FROM_S) -> list[Series] | None:
        """A range query over recorded series, when the window is long enough to want them (`shortest`) and they
        cover its start (else None: the rules are not loaded, or started within the window)."""
        if window.span < shortest:
            return None
        series = self.query_range(promql, window)
        if not series or not any(one.points and one.points[0][0] <= window.start for one in series):
            return None
        return series

    def fleet_series(self, field, aggregate, *, hostnames, window):
        recorded = RECORDED_FLEET.get((field, aggregate))
        # At every window, as the embedded wiring reads its record: worked out from the raw series, each of the 61
        # steps reads every GPU's (16,456 at 2,048 nodes: seconds of Prometheus's time a panel, even over an hour).
        series = self._recorded_range(recorded, window, shortest=0) if recorded else None
        if series is not None:
            return [Series({}, series[0].points)]
        return self.gpu_series(field, hostnames=hostnames, window=window, aggregate=aggregate)

    def gpu_values_at(self, field, *, hostnames, at, nonzero=False):
        if not nonzero:
            return super().gpu_values_at(field, hostnames=hostnames, at=at)
        # Prometheus leaves out the zeros: at 16,000 GPUs every GPU's reading is ~1 s of its time and of parsing here;
        # its rules leave them out at every scrape where they are loaded (RECORDED_NONZERO). The few left are matched
        # to the hosts here, not by a regular expression of every host name it would try on every series.
        metric, wanted = GPU_FIELDS[field][0], set(hostnames)
        recorded = RECORDED_NONZERO.get(field)
        answer = self.query(f"{recorded} or {RECORDED_NONZERO_RAN}", at=at) if recorded else []
        if not any(item["metric"].get("__name__") == RECORDED_NONZERO_RAN for item in answer):
            answer = self.query(f"{metric} != 0", at=at)  # the rules not loaded: every GPU's latest sample
        values = {}
        for item in answer:
            key = _gpu_key(item["metric"])
            if key[0] in wanted:
                values[key] = float(item["value"][1])
        return values

    def gpu_series(self, field, *, hostnames, window, aggregate=""):
        metric, _ = GPU_FIELDS[field]
        selector = _on_hosts(metric, hostnames)
        if aggregate:
            return self.query_range(f"{aggregate}({selector})", window)
        return [
            Series({"Hostname": one.labels.get("Hostname", ""), "gpu": one.labels.get("gpu", "")}, one.points)
            for one in self.query_range(selector, window)
        ]

    def gpu_means(self, fields, *, hostnames, window):
        # Averaged in Prometheus at the window's steps (a subquery, a second short of the start as elsewhere): a mean a
        # GPU comes back, not its 61 points (at 16,000 GPUs two fields' points were ~2 million, ~1 s of JSON here).
        span, step = int(round(window.span)) - 1, max(int(round(window.step)), 1)
        answers = self.gather(
            {
                name: partial(
                    self.query,
                    f"avg_over_time({_on_hosts(GPU_FIELDS[name][0], hostnames)}[{span}s:{step}s])",
                    at=window.end,
                )
                for name in fields
            }
        )
        return {
            name: {
                _gpu_key(item["metric"]): float(item["value"][1])
                for item in answer
                if not math.isnan(float(item["value"][1]))
            }
            for name, answer in answers.items()
        }

    def fleet_energy_joules(self, *, hostnames, start, end):
        seconds = max(int(round(end - start)), 1)

        def tiles(held: int) -> float | None:
            # The recorded 5-minute tiles in the window, used where the first tile of what Prometheus holds of it is
            # recorded (the rule ran from then); a second short of the start, so that a tile ending on it is left
            # out. From an hour on, as the embedded record is read: the counters' increase over an hour reads every
            # GPU's samples (~1 s of Prometheus's time at 16,000 GPUs).
            promql = (
                f'label_replace(sum_over_time({RECORDED_FLEET_ENERGY}[{seconds - 1}s]), "part", "joules", "", "") '
                f'or label_replace({_first_tile(RECORDED_FLEET_ENERGY, held)}, "part", "first", "", "")'
            )
            parts = {item["metric"].get("part"): float(item["value"][1]) for item in self.query(promql, at=end)}
            return parts.get("joules", 0.0) if parts.get("first") else None

        joules = self._from_record(seconds, end, tiles, shortest=COARSE_INTERVAL_S) if seconds >= TILES_FROM_S else None
        return joules if joules is not None else self.energy_joules(hostnames=hostnames, start=start, end=end)

    def energy_joules(self, *, hostnames, start, end):
        seconds = max(int(round(end - start)), 1)
        selector = _on_hosts(ENERGY_METRIC, hostnames)
        promql = f"sum(increase({selector}[{seconds}s]))"
        if seconds > 86_400:
            # Past a day, the counters' difference between the window's ends: two samples a GPU instead of every one
            # in the window. A counter that went down (the driver reloaded) or has no value at the start counts
            # what it holds at the end (its energy since it restarted), as increase() would.
            promql = f"sum(({selector} - {selector} offset {seconds}s) >= 0 or {selector})"
        result = self.query(promql, at=end)
        return float(result[0]["value"][1]) / 1000 if result else 0.0

    def sm_active_seconds(self, *, hostnames, start, end):
        seconds = max(int(round(end - start)), 1)
        metric = GPU_FIELDS["sm_active"][0]
        # The mean over the window's samples times its length: Prometheus does the sum. Past a day, the mean of hourly
        # means (a subquery), so that no query holds a month of raw samples at once (its max-samples limit).
        selector = _on_hosts(metric, hostnames)
        if seconds > 86_400:
            # Hours without samples add nothing (a GPU scraped for part of the window is not taken at its mean).
            # The range stops a second short of the start, so that Prometheus 2.x (both ends) and 3.x (start left
            # out) take the same steps.
            promql = f"sum_over_time(avg_over_time({selector}[1h])[{seconds - 1}s:1h]) * 3600"
        else:
            promql = f"avg_over_time({selector}[{seconds}s]) * {seconds}"
        return {_gpu_key(item["metric"]): float(item["value"][1]) for item in self.query(promql, at=end)}

    def node_busy_seconds(self, *, hostnames, start, end):
        seconds = max(int(round(end - start)), 1)
        # The recorded 5-minute tiles in the window (a second short of its start), where the first tile of what
        # Prometheus holds of it is recorded (as fleet_energy_joules); else every GPU's samples, summed per node.
        # Every node's tiles, matched to the hosts here: a regular expression of a fleet's host names, tried on every
        # series, cost Prometheus more than the answer (one series a node).
        if seconds >= TILES_FROM_S:
            # Whether the tiles cover the window, asked beside the tiles themselves (their sum is the window's either
            # way; unused where they do not cover it).
            answers = self.gather(
                {
                    "covered": partial(
                        self._from_record,
                        seconds,
                        end,
                        lambda held: self.query(f"count({_first_tile(RECORDED_NODE_BUSY, held)})", at=end) or None,
                        shortest=COARSE_INTERVAL_S,
                    ),
                    "tiles": partial(
                        self.query, f"sum by (Hostname) (sum_over_time({RECORDED_NODE_BUSY}[{seconds - 1}s]))", at=end
                    ),
                }
            )
            if answers["covered"]:
                wanted = set(hostnames)
                return {
                    item["metric"].get("Hostname", ""): float(item["value"][1])
                    for item in answers["tiles"]
                    if item["metric"].get("Hostname", "") in wanted
                }
        return super().node_busy_seconds(hostnames=hostnames, start=start, end=end)

    def recorded_slo_latest(self, *, slo, end):
        """The newest `rackpilot:slo_value` of the hour before `end`; None (worked out from the SLI's series instead)
        where there is none: the rules are not loaded, or nothing was judged."""
        result = self.query(f"last_over_time(rackpilot:slo_value{{slo={_string(slo)}}}[1h])", at=end)
        return Latest(float(result[0]["value"][1])) if result else None

    def recorded_slo_counts(self, *, slos, span, end):
        """From the `rackpilot:slo_good` series the generated recording rules write every minute, for the SLOs whose
        series covers the window (a sample in its first hour); one query for them all. Those left out are not
        recorded (rules not loaded, or recently)."""
        if not slos:
            return {}
        seconds = max(int(round(span)), 3600)

        def covered(held: int, slos: list[str]) -> dict[str, tuple[int, int]]:
            # Covered: a verdict in the first hour of the last `held` seconds (a Prometheus loading the rules from its
            # start covers what it holds).
            recorded = f"rackpilot:slo_good{{slo=~{_any_of(slos)}}}"
            offset = f" offset {held - 3600}s" if held > 3600 else ""  # PromQL refuses "offset 0s"
            promql = " or ".join(
                f'label_replace(sum by (slo) ({function}({recorded}{over})), "part", "{part}", "", "")'
                for part, function, over in (
                    ("judged", "count_over_time", f"[{seconds - 1}s]"),
                    ("good", "sum_over_time", f"[{seconds - 1}s]"),
                    ("first", "count_over_time", f"[1h]{offset}"),
                )
            )
            counts = defaultdict(dict)
            for item in self.query(promql, at=end):
                counts[item["metric"].get("slo", "")][item["metric"].get("part")] = float(item["value"][1])
            return {
                slo: (int(parts.get("judged", 0)), int(round(parts.get("good", 0))))
                for slo, parts in counts.items()
                if slo in slos and parts.get("first")
            }

        # The whole window first; the SLOs it leaves out, over what Prometheus holds of it (as _from_record).
        counts = covered(seconds, slos)
        missing = [slo for slo in slos if slo not in counts]
        if missing and (held := self._held(seconds, end)) < seconds:
            counts.update(covered(held, missing))
        return counts

    def slo_counts(self, *, good_expression, span, resolution, end):
        # One instant query per SLO and window: Prometheus evaluates the criterion at every step of the subquery
        # (aligned to multiples of the resolution, as the rules' 1 m interval is) and counts; no samples travel.
        # Both counts come from one pass: each judged step adds SLO_PACK plus its 0/1 verdict, so the sum is
        # judged * SLO_PACK + good (exact in a double while the steps number fewer than SLO_PACK).
        seconds = max(int(round(span)), resolution)
        # Steps before Prometheus's first sample judge nothing: the subquery keeps to where it holds samples (a new
        # Prometheus's 30-day subquery over 16,000 GPUs otherwise runs past any timeout, for nothing).
        held = int(end - self.samples_begin(end=end)) + resolution
        seconds = min(seconds, max(held, resolution))
        if seconds // resolution >= SLO_PACK:
            raise TelemetryError(f"an SLO window of {seconds} s at {resolution} s steps has too many steps")
        # A second short of the start: the same steps from Prometheus 2.x (both ends) and 3.x (start left out).
        inner = f"(({good_expression}) + {SLO_PACK})[{seconds - 1}s:{resolution}s]"
        result = self.query(f"sum_over_time({inner})", at=end)
        if not result:
            return 0, 0
        packed = int(round(float(result[0]["value"][1])))
        return packed // SLO_PACK, packed % SLO_PACK

    def tokens_per_second(self, *, service, window):
        # Over long windows, the mean of the recorded 5-minute rates over each step: what rate() over the step gives.
        recorded = f"{RECORDED_TOKENS}{{service={_string(service)}}}"
        series = self._recorded_range(f"sum(avg_over_time({recorded}[{int(window.rate_range)}s]))", window)
        if series is None:
            promql = f"sum(rate({TOKENS_METRIC}{{service={_string(service)}}}[{int(window.rate_range)}s]))"
            series = self.query_range(promql, window)
        return Series({"service": service}, series[0].points if series else [])

    def p99_latency_seconds(self, *, service, window):
        # Over long windows, the quantile of the recorded bucket rates' means over each step (what rate() over the
        # step gives): the 5-minute ones for steps of an hour or more, else (or if those are not recorded) the 1-minute.
        series = None
        recorded = [RECORDED_E2E_BUCKETS_COARSE] if window.rate_range >= COARSE_FROM_S else []
        for name in [*recorded, RECORDED_E2E_BUCKETS]:
            means = f"avg_over_time({name}{{service={_string(service)}}}[{int(window.rate_range)}s])"
            series = self._recorded_range(f"histogram_quantile(0.99, sum by (le) ({means}))", window)
            if series is not None:
                break
        if series is None:
            rate = f"rate({E2E_BUCKETS_METRIC}{{service={_string(service)}}}[{int(window.rate_range)}s])"
            series = self.query_range(f"histogram_quantile(0.99, sum by (le) ({rate}))", window)
        points = [(t, value) for t, value in (series[0].points if series else []) if not math.isnan(value)]
        return Series({"service": service}, points)

    def worst_p99_latency_seconds(self, *, service, window):
        # max_over_time of the recorded minute p99s in (start, end] (a second short of the start, as elsewhere), where
        # the rule ran through the window's first hour (any service's p99: it records them all); else worked out.
        seconds = max(int(round(window.span)), 1)
        recorded = f"{RECORDED_E2E_P99}{{service={_string(service)}}}"
        offset = f" offset {seconds - 3600}s" if seconds > 3600 else ""  # PromQL refuses "offset 0s"
        promql = (
            f'label_replace(max(max_over_time({recorded}[{seconds - 1}s])), "part", "worst", "", "") '
            f'or label_replace(count(count_over_time({RECORDED_E2E_P99}[1h]{offset})), "part", "first", "", "")'
        )
        parts = {item["metric"].get("part"): float(item["value"][1]) for item in self.query(promql, at=window.end)}
        if parts.get("first"):
            worst = parts.get("worst", math.nan)  # NaN: no request in any minute (max_over_time skips NaN minutes)
            return Worst(None if math.isnan(worst) else worst, RECORDING_INTERVAL_S)
        return super().worst_p99_latency_seconds(service=service, window=window)

    def generated_tokens(self, *, service, start, end):
        seconds = max(int(round(end - start)), 1)
        if seconds >= RECORDED_FROM_S:
            # The recorded rate's samples (one a minute) times the minute; used when they cover the window's first
            # hour (the rules ran all through it), as recorded_slo_counts does.
            recorded = f"{RECORDED_TOKENS}{{service={_string(service)}}}"
            promql = (
                f'label_replace(sum(sum_over_time({recorded}[{seconds - 1}s])) * {RECORDING_INTERVAL_S}, "part", '
                f'"tokens", "", "") or label_replace(sum(count_over_time({recorded}[1h] offset {seconds - 3600}s)), '
                '"part", "first", "", "")'
            )
            parts = {item["metric"].get("part"): float(item["value"][1]) for item in self.query(promql, at=end)}
            if parts.get("first"):
                return parts.get("tokens", 0.0)
        result = self.query(f"sum(increase({TOKENS_METRIC}{{service={_string(service)}}}[{seconds}s]))", at=end)
        return float(result[0]["value"][1]) if result else 0.0


def telemetry() -> Telemetry:
    """The source the settings choose: Prometheus when RACKPILOT_PROMETHEUS_URL is set, else the simulator.
    TelemetryError for a Prometheus URL that may not be called. One source a read request: its panels share the
    simulator's model (built from one inventory fingerprint, one read of the workloads and the ledger)."""
    url = settings.RACKPILOT_PROMETHEUS_URL
    return kept_for_this_read(("telemetry", url, settings.RACKPILOT_SIM_SEED), partial(_configured_source, url))


def _configured_source(url: str) -> Telemetry:
    if url:
        return PrometheusTelemetry(
            url,
            timeout=settings.RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS,
            allow_link_local=settings.RACKPILOT_PROMETHEUS_ALLOW_LINK_LOCAL,
        )
    return SimulatorTelemetry()
