"""The telemetry watch: each minute, the GPU faults the telemetry reports now become health events (apps/health).

It reads through the one telemetry interface, so the same code watches dcgm-exporter's series in Prometheus
(`DCGM_FI_DEV_XID_ERRORS`, the last XID a GPU raised; `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, uncorrectable ECC errors since
the driver loaded) in the services wiring and the simulator's recorded minutes in the embedded one, never the
simulator itself. A fault that goes quiet is not cleared here: a GPU that stopped reporting an XID is not proven
fixed; a passed validation or an operator clears the event."""

import datetime as dt
import logging
import math
import time

from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import NodeRole
from apps.inventory.models import Gpu
from apps.monitoring.telemetry import GPU_FIELDS, TelemetryError, telemetry
from apps.parsers.xid import xid_info

logger = logging.getLogger(__name__)

READ_EVERY_S = 15  # docker/prometheus.yml's scrape_interval: "now" is rounded up to it, as the dashboard reads
# XIDs by what they need: a GPU that must be reset or is gone is critical; a driver or memory fault major; what an
# application causes (13, 31, 43: its own bad access) minor.
XID_SEVERITY = {"hardware": Severity.CRITICAL, "bus": Severity.CRITICAL, "nvlink": Severity.MAJOR,
                "memory": Severity.MAJOR, "driver": Severity.MAJOR, "application": Severity.MINOR}  # fmt: skip


def watch_telemetry(*, now: float | None = None) -> list[HealthEvent]:
    """Record an event per GPU reporting an XID or uncorrectable ECC errors at `now` (default: the latest scrape).
    Returns the events recorded or folded; none when the telemetry cannot be read (logged, tried next minute)."""
    end = math.ceil(time.time() / READ_EVERY_S) * READ_EVERY_S if now is None else now
    gpus = {
        (gpu.node.hostname, str(gpu.index)): gpu
        for gpu in Gpu.objects.filter(node__role=NodeRole.COMPUTE).select_related("node")
    }
    hosts = sorted({host for host, _ in gpus})
    if not hosts:
        return []
    try:
        source = telemetry()
        xids = source.gpu_values_at("xid", hostnames=hosts, at=end)
        eccs = source.gpu_values_at("ecc_dbe", hostnames=hosts, at=end)
    except TelemetryError as error:
        logger.warning("telemetry watch: the telemetry could not be read: %s", error)
        return []
    at = dt.datetime.fromtimestamp(end, tz=dt.UTC)
    events = []
    for key, value in sorted(xids.items()):
        if value and key in gpus:
            events.append(_xid(gpus[key], int(value), at))
    for key, value in sorted(eccs.items()):
        if value and key in gpus:
            events.append(_ecc(gpus[key], int(value), at))
    return events


def _xid(gpu: Gpu, code: int, at: dt.datetime) -> HealthEvent:
    info = xid_info(code)
    what = f"XID {code}" + (f", {info.name}" if info else "")
    return health.record_event(
        component=gpu,
        source=Source.TELEMETRY,
        kind=f"xid{code}",
        severity=XID_SEVERITY.get(info.category, Severity.MAJOR) if info else Severity.MAJOR,
        summary=f"GPU {gpu.index}: {what}",
        evidence={"metric": GPU_FIELDS["xid"][0], "xid": code, **({"action": info.action} if info else {})},
        at=at,
    )


def _ecc(gpu: Gpu, count: int, at: dt.datetime) -> HealthEvent:
    return health.record_event(
        component=gpu,
        source=Source.TELEMETRY,
        kind="ecc_uncorrectable",
        severity=Severity.CRITICAL,
        summary=f"GPU {gpu.index}: {count} uncorrectable ECC error(s) since the driver loaded",
        evidence={"metric": GPU_FIELDS["ecc_dbe"][0], "ecc_dbe": count},
        at=at,
    )
