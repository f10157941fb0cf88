"""What the telemetry pages show, read through the telemetry interface. Reads only: nothing here writes."""

import time

from django.db.models import Prefetch

from apps.inventory.choices import GpuHealth
from apps.inventory.models import Gpu, Node
from apps.monitoring import charts
from apps.monitoring.telemetry import Telemetry, TelemetryError, Window, telemetry
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
