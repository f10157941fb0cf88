"""What the telemetry pages show, read through the telemetry interface. Reads only: nothing here writes."""

import math
import time

from django.db.models import Prefetch

from apps.diagnosis.models import Incident
from apps.inventory.choices import GpuHealth
from apps.inventory.models import Gpu, Node
from apps.monitoring import charts, slo
from apps.monitoring.telemetry import JOULES_PER_KWH, Telemetry, TelemetryError, Window, telemetry
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


def service_rows(source: Telemetry, window: Window, services) -> list[dict]:
    rows = []
    for service in services:
        tokens = source.tokens_per_second(service=service.name, window=window)
        p99 = source.p99_latency_seconds(service=service.name, window=window)
        energy = source.energy_per_million_tokens_kwh(service=service, start=window.start, end=window.end)
        values = tokens.values()
        rows.append(
            {
                "service": service,
                "chart_id": f"service-{service.public_id}",
                "mean_tokens_per_second": sum(values) / len(values) if values else None,
                "worst_p99_ms": 1000 * max(p99.values()) if p99.points else None,
                "kwh_per_million_tokens": energy,
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


def cluster_page(*, window: Window) -> dict:
    source, error = _source()
    context = {"source": getattr(source, "source", ""), "error": error, "figures": {}, "services": []}
    if source is None:
        return context
    hosts = gpu_hostnames()
    try:
        util = source.gpu_series("util", hostnames=hosts, window=window, aggregate="avg")
        sm_active = source.gpu_series("sm_active", hostnames=hosts, window=window, aggregate="avg")
        power = source.gpu_series("power", hostnames=hosts, window=window, aggregate="sum")
        xid = source.gpu_series("xid", hostnames=hosts, window=window, aggregate="max")
        services = InferenceService.objects.active().prefetch_related("nodes")
        context["services"] = service_rows(source, window, services)
        context["energy_kwh"] = source.energy_joules(hostnames=hosts, start=window.start, end=window.end) / 3.6e6
    except TelemetryError as error:
        context["error"] = str(error)
        return context
    context["figures"] = {
        "utilisation": charts.figure_json(charts.utilisation_figure(util, sm_active)),
        "power": charts.figure_json(charts.gpu_lines(power, title="Cluster GPU power", y_title="W")),
        "xid": charts.figure_json(charts.xid_figure(xid)),
    }
    return context


def node_page(*, node: Node, window: Window) -> dict:
    source, error = _source()
    context = {"source": getattr(source, "source", ""), "error": error, "figures": {}}
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
        context["services"] = service_rows(source, window, services)
    except TelemetryError as error:
        context["error"] = str(error)
        return context
    context["clock_reasons"] = charts.reasons_in(series["clock_reasons"])
    context["figures"] = {
        "utilisation": charts.figure_json(charts.utilisation_figure(series["util"], series["sm_active"])),
        "power": charts.figure_json(charts.gpu_lines(series["power"], title="Power", y_title="W")),
        "temperature": charts.figure_json(charts.gpu_lines(series["temperature"], title="Temperature", y_title="°C")),
        "clocks": charts.figure_json(charts.gpu_lines(series["sm_clock"], title="SM clock", y_title="MHz")),
        "xid": charts.figure_json(charts.xid_figure(series["xid"])),
    }
    return context


def telemetry_health(*, now: float | None = None) -> dict:
    """GPUs the inventory calls healthy, less those whose telemetry reports an XID or uncorrectable ECC errors now:
    the dashboard's Healthy count with what the cards themselves say."""
    source, error = _source()
    healthy = {
        (gpu.node.hostname, str(gpu.index))
        for gpu in Gpu.objects.filter(health=GpuHealth.HEALTHY).select_related("node")
    }
    context = {"error": error, "inventory_healthy": len(healthy), "flagged": [], "healthy": None}
    if source is None:
        return context
    end = time.time() if now is None else now
    window = Window(end=end, span=0, step=60, rate_range=60)
    hosts = sorted({hostname for hostname, _ in healthy})
    try:
        readings = {
            field: {
                (one.labels["Hostname"], one.labels["gpu"]): one.values()[-1]
                for one in source.gpu_series(field, hostnames=hosts, window=window)
                if one.points
            }
            for field in ("xid", "ecc_dbe")
        }
    except TelemetryError as problem:
        context["error"] = str(problem)
        return context
    flagged = sorted(key for key in healthy if readings["xid"].get(key) or readings["ecc_dbe"].get(key))
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
    context["healthy"] = len(healthy) - len(flagged)
    return context


# --- SLOs -------------------------------------------------------------------------------------------------------------

SLO_WINDOWS = ("1h", "24h", "7d")


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
    values = []  # energy per million tokens, step by step
    for start in window.times()[:-1]:
        end = start + window.step
        tokens = source.generated_tokens(service=spec.service, start=start, end=end)
        joules = source.energy_joules(hostnames=list(spec.hosts), start=start, end=end)
        values.append(joules / JOULES_PER_KWH / (tokens / 1e6) if tokens > 0 else None)
    return values


def slo_status(row, *, source: Telemetry | None = None) -> dict:
    """One SLO over each window: its budget, the latest value, and the nodes that drag it (lowest utilisation)."""
    source, error = (source, "") if source is not None else _source()
    status = {"slo": row, "error": error, "budgets": [], "latest": None, "draggers": []}
    if source is None:
        return status
    spec = row.spec()
    try:
        for name in SLO_WINDOWS:
            values = slo_values(source, spec, Window.named(name))
            status["budgets"].append(slo.budget(spec, name, [slo.meets(spec, value) for value in values]))
            if name == "1h":
                status["latest"] = next((v for v in reversed(values) if v is not None and not math.isnan(v)), None)
        status["draggers"] = draggers(source, list(spec.hosts), Window.named("1h"))
    except TelemetryError as problem:
        status["error"] = str(problem)
    return status


def draggers(source: Telemetry, hostnames: list[str], window: Window, *, count: int = 3) -> list[dict]:
    """The scope's nodes with the lowest mean GPU utilisation over the window, and their open incidents: which
    node hurts the SLO."""
    by_node: dict[str, list[float]] = {}
    for series in source.gpu_series("util", hostnames=hostnames, window=window):
        host = series.labels.get("Hostname", "")
        by_node.setdefault(host, []).extend(value for value in series.values() if not math.isnan(value))
    means = sorted((sum(values) / len(values), host) for host, values in by_node.items() if values and host)[:count]
    nodes = Node.objects.in_bulk([host for _, host in means], field_name="hostname")
    return [
        {
            "node": nodes[host],
            "mean_util": mean,
            # diagnosis's records, read only: the node's open incidents say why it may drag
            "open_incidents": Incident.objects.active().touching(nodes[host]).count(),
        }
        for mean, host in means
        if host in nodes
    ]
