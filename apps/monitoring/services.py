"""What the telemetry pages show, read through the telemetry interface. Reads only: nothing here writes."""

import math
from functools import partial

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from apps.benchmarks import services as benchmarks
from apps.core.reads import kept_for_this_read
from apps.diagnosis import services as diagnosis
from apps.inventory.census import gpu_census
from apps.inventory.choices import GpuHealth
from apps.inventory.models import Gpu, Node
from apps.monitoring import charts, slo
from apps.monitoring.models import Slo, SloBlame
from apps.monitoring.telemetry import (
    JOULES_PER_KWH,
    RECORDING_INTERVAL_S,
    SimulatorTelemetry,
    Telemetry,
    TelemetryError,
    Window,
    telemetry,
)
from apps.workloads.models import InferenceService


def _source() -> tuple[Telemetry | None, str]:
    try:
        return telemetry(), ""
    except TelemetryError as error:
        return None, str(error)


def gpu_hostnames() -> list[str]:
    return list(
        Node.objects.filter(gpus__isnull=False).distinct().order_by("hostname").values_list("hostname", flat=True)
    )


def service_questions(source: Telemetry, window: Window, services) -> dict:
    """What a page asks about each service (its nodes prefetched: the questions go to the source only)."""
    questions = {}
    for service in services:
        questions[("tokens", service.pk)] = partial(source.tokens_per_second, service=service.name, window=window)
        questions[("p99", service.pk)] = partial(source.p99_latency_seconds, service=service.name, window=window)
        questions[("worst_p99", service.pk)] = partial(
            source.worst_p99_latency_seconds, service=service.name, window=window
        )
        questions[("energy", service.pk)] = partial(
            source.energy_per_million_tokens_kwh, service=service, start=window.start, end=window.end
        )
    return questions


def step_text(window: Window) -> str:
    """A window's step in words ("1 min", "24 min", "12 h"): each point of its charts stands for that long."""
    return _duration_text(window.step)


def _duration_text(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:g} min" if minutes < 60 else f"{minutes / 60:.2g} h"


def service_rows(answers: dict, services) -> list[dict]:
    """Each service's row and figure from the answers to service_questions."""
    rows = []
    for service in services:
        tokens, p99 = answers[("tokens", service.pk)], answers[("p99", service.pk)]
        worst = answers[("worst_p99", service.pk)]
        values = tokens.values()
        rows.append(
            {
                "service": service,
                "chart_id": f"service-{service.public_id}",
                "mean_tokens_per_second": sum(values) / len(values) if values else None,
                "worst_p99_ms": 1000 * worst.value if worst.value is not None else None,
                # Where the minute record does not cover the window yet, the worst of the steps: how long each is.
                "worst_p99_of": _duration_text(worst.every) if worst.every != RECORDING_INTERVAL_S else "",
                "kwh_per_million_tokens": answers[("energy", service.pk)],
                "figure": charts.figure_json(
                    charts.service_figure(
                        tokens,
                        p99,
                        design=service.design_tokens_per_second,
                        target_ms=service.latency_target_ms,
                        name=service.name,
                    )
                ),
            }
        )
    return rows


# The cluster page's GPU panels: (field, aggregate) by name.
CLUSTER_PANELS = {
    "util": ("util", "avg"),
    "sm_active": ("sm_active", "avg"),
    "power": ("power", "sum"),
    "xid": ("xid", "max"),
}


def cluster_page(*, window: Window) -> dict:
    source, error = _source()
    context = {
        "source": getattr(source, "source", ""),
        "error": error,
        "figures": {},
        "services": [],
        "p99_step": step_text(window),
    }
    if source is None:
        return context
    hosts = gpu_hostnames()
    services = list(InferenceService.objects.active().prefetch_related("nodes"))
    questions = {
        name: partial(source.fleet_series, field, aggregate, hostnames=hosts, window=window)
        for name, (field, aggregate) in CLUSTER_PANELS.items()
    }
    questions["energy"] = partial(source.fleet_energy_joules, hostnames=hosts, start=window.start, end=window.end)
    questions |= service_questions(source, window, services)
    try:
        answers = source.gather(questions)  # independent: Prometheus answers them at once
    except TelemetryError as error:
        context["error"] = str(error)
        return context
    context["services"] = service_rows(answers, services)
    context["energy_kwh"] = answers["energy"] / JOULES_PER_KWH
    context["figures"] = {
        "utilisation": charts.figure_json(charts.utilisation_figure(answers["util"], answers["sm_active"])),
        "power": charts.figure_json(charts.gpu_lines(answers["power"], title="Cluster GPU power", y_title="W")),
        "xid": charts.figure_json(charts.xid_figure(answers["xid"], window=window)),
    }
    return context


def node_page(*, node: Node, window: Window) -> dict:
    source, error = _source()
    context = {"source": getattr(source, "source", ""), "error": error, "figures": {}, "p99_step": step_text(window)}
    if source is None:
        return context
    hosts = [node.hostname]
    try:
        series = {
            field: source.gpu_series(field, hostnames=hosts, window=window)
            for field in ("util", "sm_active", "power", "temperature", "sm_clock", "clock_reasons", "xid")
        }
        context["energy_kwh"] = source.energy_joules(hostnames=hosts, start=window.start, end=window.end) / 3.6e6
        services = InferenceService.objects.filter(nodes=node).prefetch_related(
            Prefetch("nodes", queryset=Node.objects.order_by("hostname"))
        )
        services = list(services)
        context["services"] = service_rows(source.gather(service_questions(source, window, services)), services)
    except TelemetryError as error:
        context["error"] = str(error)
        return context
    context["clock_reasons"] = charts.reasons_in(series["clock_reasons"])
    context["figures"] = {
        "utilisation": charts.figure_json(charts.utilisation_figure(series["util"], series["sm_active"])),
        "power": charts.figure_json(charts.gpu_lines(series["power"], title="Power", y_title="W")),
        "temperature": charts.figure_json(charts.gpu_lines(series["temperature"], title="Temperature", y_title="°C")),
        "clocks": charts.figure_json(charts.gpu_lines(series["sm_clock"], title="SM clock", y_title="MHz")),
        "xid": charts.figure_json(charts.xid_figure(series["xid"], window=window)),
    }
    return context


def telemetry_health(*, now: float | None = None, hostname: str | None = None) -> dict:
    """GPUs the inventory calls healthy, less those whose telemetry reports an XID or uncorrectable ECC errors now:
    the dashboard's Healthy count with what the cards themselves say; `hostname`: that node's GPUs only. The fleet's
    is worked out once a read request: the dashboard asks twice (this panel and the fleet-health number)."""
    if now is None and hostname is None:
        return kept_for_this_read("telemetry_health", _telemetry_health)
    return _telemetry_health(now=now, hostname=hostname)


HEALTH_READ_EVERY_S = 15  # docker/prometheus.yml's scrape_interval


def _telemetry_health(*, now: float | None = None, hostname: str | None = None) -> dict:
    source, error = _source()
    healthy = Gpu.objects.filter(health=GpuHealth.HEALTHY)
    if hostname is not None:
        healthy = healthy.filter(node__hostname=hostname)
    census = gpu_census(hostname=hostname)
    inventory_healthy = census.by_health[GpuHealth.HEALTHY]
    context = {"error": error, "inventory_healthy": inventory_healthy, "flagged": [], "healthy": None}
    if source is None:
        return context
    # "Now" rounded up to the scrape interval: what Prometheus scraping every 15 s would show, up, not down, so that
    # what was scraped a moment ago is in force. The simulator reads its record's minute at or before it.
    end = math.ceil(timezone.now().timestamp() / HEALTH_READ_EVERY_S) * HEALTH_READ_EVERY_S if now is None else now
    hostnames = census.hostnames_with(GpuHealth.HEALTHY)
    try:
        readings = source.gather(
            {
                field: partial(source.gpu_values_at, field, hostnames=hostnames, at=end, nonzero=True)
                for field in ("xid", "ecc_dbe")
            }
        )
    except TelemetryError as problem:
        context["error"] = str(problem)
        return context
    # The GPUs that report something are few: only theirs are asked for and looked up (a fleet has tens of thousands).
    reporting = {key for values in readings.values() for key in values}
    named = healthy.filter(node__hostname__in={host for host, _ in reporting})
    flagged = sorted(reporting & {(host, str(index)) for host, index in named.values_list("node__hostname", "index")})
    nodes = {node.hostname: node for node in Node.objects.filter(hostname__in={host for host, _ in flagged})}
    context["flagged"] = [
        {
            "node": nodes[host],
            "gpu": gpu,
            "xid": int(readings["xid"].get((host, gpu), 0)),
            "ecc": int(readings["ecc_dbe"].get((host, gpu), 0)),
        }
        for host, gpu in flagged
    ]
    context["healthy"] = context["inventory_healthy"] - len(flagged)
    return context


# --- SLOs -------------------------------------------------------------------------------------------------------------

SLO_WINDOWS = ("1h", "24h", "7d", "30d")
BLAME_COUNT = 3
BLAME_KEPT_S = 86_400  # SloBlame rows: a view reads the newest


def slo_values(source: Telemetry, spec: slo.SloSpec, window: Window) -> list[float | None]:
    """The SLI's value at each step of the window, in the criterion's unit (None: nothing to judge at that step)."""
    objective = slo.Objective(spec.objective)
    if objective == slo.Objective.THROUGHPUT:
        series = source.tokens_per_second(service=spec.service, window=window)
        return [100 * value / spec.design_tokens_per_second for value in series.values()]
    if objective == slo.Objective.LATENCY_P99:
        return [1000 * value for value in source.p99_latency_seconds(service=spec.service, window=window).values()]
    if objective == slo.Objective.GPU_UTILISATION:
        series = source.gpu_series("util", hostnames=list(spec.hosts), window=window, aggregate="avg")
        return series[0].values() if series else []
    # Energy per million tokens, step by step: each step's tokens and joules, asked side by side.
    starts = window.times()[:-1]
    questions = {}
    for start in starts:
        end = start + window.step
        questions["tokens", start] = partial(source.generated_tokens, service=spec.service, start=start, end=end)
        questions["joules", start] = partial(source.energy_joules, hostnames=list(spec.hosts), start=start, end=end)
    answers = source.gather(questions)
    values = []
    for start in starts:
        tokens, joules = answers[("tokens", start)], answers[("joules", start)]
        values.append(joules / JOULES_PER_KWH / (tokens / 1e6) if tokens > 0 else None)
    return values


def slo_budget(source: Telemetry, spec: slo.SloSpec, name: str, *, end: float | None = None) -> slo.Budget:
    """The SLO over one window. Prometheus counts the judged and met steps itself: from the recording rule's series
    where it covers the window (rackpilot:slo_good, every minute), else the criterion through a subquery (every
    minute, energy every hour); the simulator is judged at the window's 60 steps in Python."""
    window, counted_to = _budget_window(name, end)
    recorded = source.recorded_slo_counts(slos=[spec.name], span=window.span, end=counted_to)
    return _budget(source, spec, name, window, counted_to, recorded.get(spec.name))


def _budget_window(name: str, end: float | None) -> tuple[Window, int]:
    """The named window ending at `end` (now), and the minute its steps are counted to."""
    # Every window is counted to the same minute (a page's windows agree: 30 d holds the misses of 7 d), not to its
    # chart's end, which a 30-day window aligns to its 12-hour step and so left up to half a day of misses out.
    counted_to = math.floor((timezone.now().timestamp() if end is None else end) / 60) * 60
    return Window.named(name, end=end), counted_to


def _budget(
    source: Telemetry, spec: slo.SloSpec, name: str, window: Window, counted_to: int, recorded: tuple[int, int] | None
) -> slo.Budget:
    """slo_budget's count, given what the record said of the SLO (`recorded`: None where it is not recorded)."""
    if recorded is not None:  # the recording rule's every-minute verdicts: two sums over one series
        judged, good = recorded
        return slo.budget_from_counts(spec, name, judged=judged, good=good, steps=int(window.span // 60))
    resolution = slo.resolution_seconds(spec)
    counts = source.slo_counts(
        good_expression=slo.good_expression(spec), span=window.span, resolution=resolution, end=counted_to
    )
    if counts is not None:
        judged, good = counts
        return slo.budget_from_counts(spec, name, judged=judged, good=good, steps=int(window.span // resolution))
    return slo.budget(spec, name, [slo.meets(spec, value) for value in slo_values(source, spec, window)])


def slo_counts_between(source: Telemetry, spec: slo.SloSpec, *, start: float, end: float) -> tuple[int, int] | None:
    """(steps judged, steps met) of the SLO over [start, end], counted as slo_budget counts a window: the recorded
    verdicts, else Prometheus's count, else the criterion over the samples; None for an empty interval."""
    span = end - start
    if span < 60:
        return None
    recorded = source.recorded_slo_counts(slos=[spec.name], span=span, end=end).get(spec.name)
    if recorded is not None:
        return recorded
    resolution = slo.resolution_seconds(spec)
    counts = source.slo_counts(good_expression=slo.good_expression(spec), span=span, resolution=resolution, end=end)
    if counts is not None:
        return counts
    step = max(float(resolution), span / 60)  # the page's 60 steps a window
    window = Window(end=end, span=span, step=step, rate_range=max(step, 60.0))
    verdicts = [slo.meets(spec, value) for value in slo_values(source, spec, window)]
    judged = [v for v in verdicts if v is not None]
    # Each of the 60 steps stands for `step` seconds: scaled to the criterion's resolution, as the budget counts.
    scale = step / resolution
    return int(round(len(judged) * scale)), int(round(sum(judged) * scale))


def slos_met(rows, *, window: str) -> list[bool | None]:
    """Whether each SLO met its objective over the window (None: nothing judged, or the telemetry unreadable). The
    recorded verdicts of them all come in one question; an SLO the record lacks is worked out from its series."""
    source, _ = _source()
    if source is None:
        return [None for _ in rows]
    named, counted_to = _budget_window(window, None)
    try:
        recorded = source.recorded_slo_counts(slos=[row.name for row in rows], span=named.span, end=counted_to)
    except TelemetryError:
        return [None for _ in rows]
    met = []
    for row in rows:
        counts = recorded.get(row.name)
        spec = row.spec(hosts=counts is None)  # recorded verdicts are counted without the SLO's nodes
        try:
            met.append(_budget(source, spec, window, named, counted_to, counts).met)
        except TelemetryError:
            met.append(None)
    return met


def slo_latest(source: Telemetry, spec: slo.SloSpec, *, end: float | None = None) -> float | None:
    """The SLI's newest value in the last hour: recorded (rackpilot:slo_value) where the source records it, else the
    last value of its series over the hour."""
    window = Window.named("1h", end=end)
    recorded = source.recorded_slo_latest(slo=spec.name, end=window.end)
    if recorded is not None:
        return recorded.value
    values = slo_values(source, spec, window)
    return next((v for v in reversed(values) if v is not None and not math.isnan(v)), None)


def slo_status(
    row, *, source: Telemetry | None = None, windows: tuple[str, ...] = SLO_WINDOWS, end: float | None = None
) -> dict:
    """One SLO over each window ending at `end` (now): its budget, the latest value, and what drags it
    (ranked_draggers)."""
    return slo_statuses([row], source=source, windows=windows, end=end)[0]


def slo_statuses(
    rows, *, source: Telemetry | None = None, windows: tuple[str, ...] = SLO_WINDOWS, end: float | None = None
) -> list[dict]:
    """slo_status of each SLO. The telemetry is asked in three rounds, each round's questions gathered (a Prometheus
    answers them side by side, not one after another): each window's recorded counts of all the SLOs at once and each
    SLO's latest value; the budgets the record lacks; what drags each SLO. The database is read between rounds."""
    source, error = (source, "") if source is not None else _source()
    statuses = [
        {"slo": row, "error": error, "budgets": [], "latest": None, "draggers": [], "blame_window": ""} for row in rows
    ]
    if source is None or not rows:
        return statuses
    specs = [row.spec() for row in rows]
    named = {name: _budget_window(name, end) for name in windows}
    first = source.gather(
        {
            **{
                ("counts", name): _caught(
                    partial(source.recorded_slo_counts, slos=[s.name for s in specs], span=window.span, end=counted_to)
                )
                for name, (window, counted_to) in named.items()
            },
            **{("latest", i): _caught(partial(slo_latest, source, spec, end=end)) for i, spec in enumerate(specs)},
        }
    )
    unrecorded = {  # budgets the record lacks: counted by Prometheus or worked out from the series
        (i, name): _caught(partial(_budget, source, spec, name, window, counted_to, None))
        for i, spec in enumerate(specs)
        for name, (window, counted_to) in named.items()
        if not isinstance(first["counts", name], TelemetryError) and spec.name not in first["counts", name]
    }
    counted = source.gather(unrecorded)
    draggers, blamed = {}, {}
    for i, (status, spec) in enumerate(zip(statuses, specs, strict=True)):
        answers = [first["latest", i], *(first["counts", name] for name in windows)]
        budgets = [
            counted[(i, name)]
            if (i, name) in counted
            else _budget(source, spec, name, *named[name], first["counts", name][spec.name])
            for name in windows
            if not isinstance(first["counts", name], TelemetryError)
        ]
        failed = next((a for a in [*answers, *budgets] if isinstance(a, TelemetryError)), None)
        if failed is not None:
            status["error"] = str(failed)
            continue
        status["latest"], status["budgets"] = first["latest", i], budgets
        # Blame over the shortest window that missed (the miss to explain), else the last hour.
        status["blame_window"] = next((b.window for b in budgets if b.met is False), "1h")
        window = Window.named(status["blame_window"], end=end)
        recorded = _recorded_blame(source, rows[i], status["blame_window"], window)
        if recorded is not None:
            status["draggers"] = blame_in_context(spec, recorded)
        else:  # a service's SLOs over the same window drag alike: asked once
            key = _draggers_key(spec, window)
            draggers.setdefault(key, _caught(partial(ranked_draggers, source, spec, window)))
            blamed[i] = key
    ranked = source.gather(draggers)
    for i, key in blamed.items():
        if isinstance(ranked[key], TelemetryError):
            statuses[i]["error"] = str(ranked[key])
        else:
            statuses[i]["draggers"] = blame_in_context(specs[i], ranked[key])
    return statuses


def _caught(question):
    """The question, answering its TelemetryError instead of raising it: one SLO's unreadable window leaves the others'
    answers on the page."""

    def ask():
        try:
            return question()
        except TelemetryError as error:
            return error

    return ask


def _recorded_blame(source: Telemetry, row, name: str, window: Window) -> list[dict] | None:
    """What drags the SLO over the window as recorded (record_slo_blame) where the source is the embedded wiring's
    and the window's step, or the one before, is recorded; else None (worked out now)."""
    if source.source != "simulator":
        return None
    return (
        SloBlame.objects.filter(slo=row, window=name, time__lte=window.end, time__gte=window.end - window.step)
        .order_by("-time")
        .values_list("draggers", flat=True)
        .first()
    )


def record_slo_blame(*, until: float) -> int:
    """The embedded wiring's minute run: what drags each SLO over each of its windows, worked out once a window's step
    (a window's blame holds for its step: its end is on that grid) and appended as SloBlame rows, so that the SLOs
    page reads them; rows older than a day are pruned. Nothing where a Prometheus records (the page asks it, cheaply).
    Returns how many were recorded."""
    if settings.RACKPILOT_PROMETHEUS_URL:
        return 0
    source = SimulatorTelemetry()
    recorded = 0
    for row in Slo.objects.select_related("service", "training_job", "rack"):
        spec = row.spec()
        for name in SLO_WINDOWS:
            window = Window.named(name, end=until)
            if SloBlame.objects.filter(slo=row, window=name, time=int(window.end)).exists():
                continue
            try:
                draggers = ranked_draggers(source, spec, window)
            except TelemetryError:  # the record does not cover the window yet: the next minute tries again
                continue
            SloBlame.objects.get_or_create(slo=row, window=name, time=int(window.end), defaults={"draggers": draggers})
            recorded += 1
    SloBlame.objects.filter(time__lt=until - BLAME_KEPT_S).delete()
    return recorded


# The objectives a failing multi-node test can explain: a slow link starves a service's tokens/s (its replicas wait
# on it) and its GPUs' utilisation. A request's latency and the energy per token are each a node's decode (its clock,
# its load); a benchmark's pair that failed says nothing about them.
LINK_BOUND_OBJECTIVES = {slo.Objective.THROUGHPUT, slo.Objective.GPU_UTILISATION}


def _failing_tests_that_bear_on(spec: slo.SloSpec, hostnames: list[str]) -> dict[str, list[dict]]:
    """The failing tests and suspects of these nodes that can be a cause of the SLO: only for the objectives a link
    bears on, and only a test between nodes of the SLO's scope (a pair with a node that does not serve the service,
    or run the job, is another workload's problem)."""
    if slo.Objective(spec.objective) not in LINK_BOUND_OBJECTIVES:
        return {}
    scope = set(spec.hosts)
    found = benchmarks.failing_pairs_by_node(hostnames)
    return {host: [test for test in tests if set(test["hosts"]) <= scope] for host, tests in found.items()}


# The objectives whose draggers are ranked by their share of the service's tokens/s (the others: utilisation points).
TOKEN_RANKED_OBJECTIVES = {slo.Objective.THROUGHPUT, slo.Objective.LATENCY_P99, slo.Objective.ENERGY_PER_MTOK}


def ranked_draggers(source: Telemetry, spec: slo.SloSpec, window: Window, *, count: int = BLAME_COUNT) -> list[dict]:
    """The scope's nodes that drag the SLO most, each with its two weakest GPUs (plain data: what the record keeps).

    Per node, from the telemetry over the window: mean GPU utilisation and SM clock, per GPU too. Its contribution:
    for a service, its share of the service's tokens/s in proportion to utilisation x SM clock of its GPUs (a card
    at a lower clock decodes slower; the service's counters are per service, not per node), and the drag is what it
    falls short of an even share, in tokens/s; for utilisation, the points of the scope's mean it costs against the
    target (target - its mean) / nodes. Nodes that drag nothing come last, by lowest utilisation.
    """
    hosts = list(spec.hosts)
    if not hosts:
        return []
    means = source.gpu_means(("util", "sm_clock"), hostnames=hosts, window=window)
    util, clock = means["util"], means["sm_clock"]
    per_node: dict[str, dict] = {}
    for (host, gpu), value in util.items():
        node = per_node.setdefault(host, {"gpus": []})
        node["gpus"].append({"gpu": gpu, "mean_util": value, "mean_sm_clock_mhz": clock.get((host, gpu))})
    clocks_known = bool(clock)  # without SM clocks (not scraped), contributions follow utilisation alone
    for row in per_node.values():
        gpus = row["gpus"]
        row["mean_util"] = sum(g["mean_util"] for g in gpus) / len(gpus)
        clocks = [g["mean_sm_clock_mhz"] for g in gpus if g["mean_sm_clock_mhz"] is not None]
        row["mean_sm_clock_mhz"] = sum(clocks) / len(clocks) if clocks else None
        row["weight"] = sum(g["mean_util"] * ((g["mean_sm_clock_mhz"] or 0) if clocks_known else 1.0) for g in gpus)
        row["missing_gpus"] = 0
    for host in hosts:  # a node whose GPUs report nothing (off the bus, exporter down) serves nothing
        per_node.setdefault(
            host, {"gpus": [], "mean_util": 0.0, "mean_sm_clock_mhz": None, "weight": 0.0, "missing_gpus": 1}
        )
    objective = slo.Objective(spec.objective)
    unit = "points"
    if objective in TOKEN_RANKED_OBJECTIVES:
        tokens = source.tokens_per_second(service=spec.service, window=window).values()
        served = sum(tokens) / len(tokens) if tokens else 0.0
        total_weight = sum(row["weight"] for row in per_node.values())
        for row in per_node.values():
            share = row["weight"] / total_weight if total_weight else 0.0
            row["tokens_per_second"] = served * share
            row["drag"] = max(0.0, served / len(per_node) - row["tokens_per_second"])
        unit = "tokens/s"
    else:
        target = spec.target
        for row in per_node.values():
            row["tokens_per_second"] = None
            row["drag"] = max(0.0, target - row["mean_util"]) / len(per_node)
    ranked = sorted(per_node.items(), key=lambda item: (-round(item[1]["drag"], 6), item[1]["mean_util"], item[0]))
    return [
        {
            "hostname": host,
            "mean_util": row["mean_util"],
            "mean_sm_clock_mhz": row["mean_sm_clock_mhz"],
            "tokens_per_second": row["tokens_per_second"],
            "drag": row["drag"],
            "drag_unit": unit,
            "reporting": not row["missing_gpus"],
            "gpus": sorted(row["gpus"], key=lambda g: (g["mean_util"], g["mean_sm_clock_mhz"] or 0))[:2],
        }
        for host, row in ranked[:count]
    ]


def _draggers_key(spec: slo.SloSpec, window: Window) -> tuple:
    """What ranked_draggers' answer depends on: two SLOs with the same key have the same draggers (a service's
    throughput, latency and energy SLOs are each ranked by its nodes' share of its tokens/s)."""
    by_tokens = slo.Objective(spec.objective) in TOKEN_RANKED_OBJECTIVES
    measure = ("tokens", spec.service) if by_tokens else ("points", spec.target)
    return (tuple(spec.hosts), measure, window.end, window.span)


def blame_in_context(spec: slo.SloSpec, draggers: list[dict]) -> list[dict]:
    """Ranked draggers with their nodes, open incidents and the failing benchmark pairs that bear on the SLO (as
    they are now)."""
    hostnames = [row["hostname"] for row in draggers]
    nodes = Node.objects.in_bulk(hostnames, field_name="hostname")
    incidents = diagnosis.open_incidents_by_node(nodes.values())
    pairs = _failing_tests_that_bear_on(spec, hostnames)
    blamed = []
    for row in draggers:
        node = nodes.get(row["hostname"])
        if node is None:
            continue
        open_incidents = incidents.get(node.pk, [])
        blamed.append(
            {
                **{key: value for key, value in row.items() if key != "hostname"},
                "node": node,
                "incidents": open_incidents,
                "open_incidents": len(open_incidents),
                "failing_tests": pairs.get(row["hostname"], []),
            }
        )
    return blamed
