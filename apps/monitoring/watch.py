"""The telemetry watch: every 30 seconds, the GPU and NIC faults the telemetry reports now become health events
(apps/health).

It reads through the one telemetry interface, so the same code watches dcgm-exporter's series in Prometheus in the
services wiring and the simulator's model in the embedded one, never the simulator itself:

- `DCGM_FI_DEV_XID_ERRORS` (the last XID a GPU raised: 79 fallen off the bus, 74 NVLink error, 48 double-bit ECC…)
  → `xid<N>`;
- `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL` > 0 (uncorrectable ECC errors since the driver loaded) → `ecc_uncorrectable`;
- `DCGM_FI_DEV_ROW_REMAP_PENDING` / `DCGM_FI_DEV_ROW_REMAP_FAILURE` = 1 → `row_remap_pending` / `row_remap_failure`;
- `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` with a thermal or power-brake bit → `gpu_thermal_slowdown` /
  `gpu_power_brake_slowdown`;
- `DCGM_FI_DEV_PCIE_LINK_WIDTH` below `DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH`, or the generation below its maximum on a
  busy GPU → `pcie_downtrained`;
- an inventoried GPU missing from the series of a node whose other GPUs report (and no XID 79 said why) →
  `gpu_missing`;
- a NIC whose link rate (node_exporter's `node_network_speed_bytes`) is below its planned rate → `link_degraded` on
  its cable, recorded where the sweep records it (the cable's measured rate set: the topology counts it);
- NVLink links a GPU reports inactive (`DCGM_FI_DEV_NVLINK_GET_STATE` per link) → `nvlink_degraded` on the GPU or
  its compute tray, or one `nvlink_switch_tray_down` on a rack-scale domain's switch tray when every GPU of the domain
  lost its links to it (apps/monitoring/nvlink_watch.py; those events are cleared here when the links are back);
- a rack-scale tray's IMEX daemon UNAVAILABLE (`DCGM_FI_IMEX_DAEMON_STATUS` = 7) → `imex_peer_lost` on the tray,
  cleared here when it reads READY;
- a NIC whose receive errors (`node_network_receive_errs_total`) grew over the last 5 minutes past the link-error
  tiers, per million frames received (`node_network_receive_packets_total`) → `link_errors` on its cable.

The embedded wiring reads the model at the moment of the run (SimulatorTelemetry.gpu_values_now), not the minute
record, which is written after its minute has passed: a fault shows within the watch's period (30 s) and the run.
A fault that goes quiet is not cleared here: a GPU that stopped reporting an XID is not proven fixed; a passed
validation or an operator clears the event. NVLink links and IMEX daemons are the exception: their state is
measured every run."""

import datetime as dt
import logging
import math
import time

from apps.benchmarks.choices import Verdict
from apps.benchmarks.health_events import nic_cable, record_link_degraded
from apps.benchmarks.link_errors import Tiers, cable_end, verdict
from apps.core.text import counted
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.choices import NodeRole
from apps.inventory.models import Gpu, Nic
from apps.monitoring.nvlink_watch import watch_imex, watch_nvlinks
from apps.monitoring.telemetry import (
    GPU_FIELDS,
    NIC_COUNTERS_RANGE_S,
    NIC_ERRORS_METRIC,
    NIC_SPEED_METRIC,
    TelemetryError,
    telemetry,
)
from apps.parsers.nvidia_smi import decode_clocks_event_reasons
from apps.parsers.xid import xid_info

logger = logging.getLogger(__name__)

READ_EVERY_S = 15  # docker/prometheus.yml's scrape_interval: "now" is rounded up to it, as the dashboard reads
# XIDs by what they need: a GPU that must be reset or is gone is critical; a driver or memory fault major; what an
# application causes (13, 31, 43: its own bad access) minor.
XID_SEVERITY = {"hardware": Severity.CRITICAL, "bus": Severity.CRITICAL, "nvlink": Severity.MAJOR,
                "memory": Severity.MAJOR, "driver": Severity.MAJOR, "application": Severity.MINOR}  # fmt: skip
FIELDS = ("xid", "ecc_dbe", "remap_pending", "remap_failure", "clock_reasons", "pcie_gen", "pcie_width",
          "pcie_max_gen", "pcie_max_width", "util")  # fmt: skip
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
POWER_BRAKE = "hw_power_brake_slowdown"
# An idle GPU lowers its PCIe generation to save power (ASPM), so a generation below the maximum says something only
# while the GPU works; a narrower link says it at any time.
BUSY_UTIL = 10
LINK_ERROR_SEVERITY = {Verdict.FAIL: Severity.MAJOR, Verdict.WARN: Severity.MINOR}


def watch_telemetry(*, now: float | None = None) -> list[HealthEvent]:
    """Record an event per GPU fault the telemetry reports at `now` (default: the latest scrape). Returns the events
    recorded or folded; none when the telemetry cannot be read (logged, tried at the next run)."""
    end = math.ceil(time.time() / READ_EVERY_S) * READ_EVERY_S if now is None else now
    gpus = {
        (gpu.node.hostname, str(gpu.index)): gpu
        for gpu in Gpu.objects.filter(node__role=NodeRole.COMPUTE).select_related("node__nvlink_domain")
    }
    hosts = sorted({host for host, _ in gpus})
    if not hosts:
        return []
    source = telemetry()
    try:
        values = source.gpu_values_now(FIELDS, hostnames=hosts, at=end)
    except TelemetryError as error:
        logger.warning("telemetry watch: the telemetry could not be read: %s", error)
        return []
    at = dt.datetime.fromtimestamp(end, tz=dt.UTC)
    events = []
    for key, gpu in sorted(gpus.items()):
        reading = {name: values[name].get(key) for name in FIELDS}
        for observe in (_xid, _ecc, _remap, _clocks, _pcie):
            for kind, severity, summary, evidence in observe(reading):
                events.append(_record(gpu, kind, severity, summary, evidence, at))
    events += _missing(gpus, values, at)
    events += watch_nvlinks(source=source, gpus=gpus, end=end, at=at)
    events += watch_imex(source=source, gpus=gpus, end=end, at=at)
    return events + _links(source, hosts, end, at)


def _links(source, hosts: list[str], end: float, at: dt.datetime) -> list[HealthEvent]:
    """Each compute node's NICs against their plan: a link up below its planned rate, errors growing past the tiers."""
    try:
        values = source.nic_values_now(hostnames=hosts, at=end)
    except TelemetryError as error:
        logger.warning("telemetry watch: the NICs' telemetry could not be read: %s", error)
        return []
    nics = Nic.objects.filter(node__hostname__in=hosts).select_related(
        "node", "cable_as_a__b_switch", "cable_as_b__a_switch"
    )
    events = []
    for nic in sorted(nics, key=lambda nic: (nic.node.hostname, nic.name)):
        reading = values.get((nic.node.hostname, nic.name))
        if reading is None:
            continue
        _, switch, port = cable_end(nic)
        where = f"{nic.node.hostname}:{nic.name}" + (f" → {switch}:{port}" if switch else "")
        measured = reading["speed_gbps"]
        if measured is not None and measured < nic.speed_gbps:
            evidence = {"metric": NIC_SPEED_METRIC, "switch": switch, "switch_port": port}
            events.append(
                record_link_degraded(
                    nic=nic,
                    measured_gbps=measured,
                    planned_gbps=nic.speed_gbps,
                    source=Source.TELEMETRY,
                    severity=Severity.MAJOR,
                    where=where,
                    evidence=evidence,
                    at=at,
                )
            )
        errors, frames = int(reading["errors"]), int(reading["frames"])
        per_million = errors / frames * 1e6 if frames else (math.inf if errors else 0.0)
        judged = verdict(per_million, Tiers())
        if errors and judged != Verdict.PASS:
            summary = f"{where}: {errors} receive errors in {frames} frames over {NIC_COUNTERS_RANGE_S // 60} min"
            evidence = {
                "metric": NIC_ERRORS_METRIC,
                "errors": errors,
                "frames": frames,
                "per_million": round(per_million, 3) if frames else None,
                "switch": switch,
                "switch_port": port,
            }
            events.append(
                health.record_event(
                    component=nic_cable(nic) or nic,
                    source=Source.TELEMETRY,
                    kind="link_errors",
                    severity=LINK_ERROR_SEVERITY[judged],
                    summary=summary,
                    evidence=evidence,
                    at=at,
                )
            )
    return events


def _record(gpu: Gpu, kind: str, severity: str, summary: str, evidence: dict, at: dt.datetime) -> HealthEvent:
    return health.record_event(
        component=gpu,
        source=Source.TELEMETRY,
        kind=kind,
        severity=severity,
        summary=f"GPU {gpu.index}: {summary}",
        evidence=evidence,
        at=at,
    )


def _metric(name: str) -> str:
    return GPU_FIELDS[name][0]


def _xid(reading: dict):
    if not reading["xid"]:
        return
    code = int(reading["xid"])
    info = xid_info(code)
    severity = XID_SEVERITY.get(info.category, Severity.MAJOR) if info else Severity.MAJOR
    evidence = {"metric": _metric("xid"), "xid": code, **({"action": info.action} if info else {})}
    yield f"xid{code}", severity, f"XID {code}" + (f", {info.name}" if info else ""), evidence


def _ecc(reading: dict):
    if reading["ecc_dbe"]:
        count = int(reading["ecc_dbe"])
        summary = f"{counted(count, 'uncorrectable ECC error')} since the driver loaded"
        yield "ecc_uncorrectable", Severity.CRITICAL, summary, {"metric": _metric("ecc_dbe"), "ecc_dbe": count}


def _remap(reading: dict):
    if reading["remap_failure"]:
        summary = "row remapping failed: the memory has no spare row left for an uncorrectable error"
        yield "row_remap_failure", Severity.CRITICAL, summary, {"metric": _metric("remap_failure"), "value": 1}
    if reading["remap_pending"]:
        summary = "row remap pending: reset the GPU to take the remapped row into use"
        yield "row_remap_pending", Severity.MAJOR, summary, {"metric": _metric("remap_pending"), "value": 1}


def _clocks(reading: dict):
    if reading["clock_reasons"] is None:
        return
    mask = int(reading["clock_reasons"])
    reasons = decode_clocks_event_reasons(mask)
    evidence = {"metric": _metric("clock_reasons"), "value": mask, "reasons": reasons}
    thermal = [name for name in THERMAL_REASONS if name in reasons]
    if thermal:
        # HW thermal slowdown halves the clocks or worse; SW thermal slowdown trims them.
        severity = Severity.MAJOR if "hw_thermal_slowdown" in thermal else Severity.MINOR
        yield "gpu_thermal_slowdown", severity, f"clocks slowed down by heat ({', '.join(thermal)})", evidence
    if POWER_BRAKE in reasons:
        summary = "clocks held down by the power brake (an external power-brake signal: PSU or BMC)"
        yield "gpu_power_brake_slowdown", Severity.MAJOR, summary, evidence


def _pcie(reading: dict):
    gen, width = reading["pcie_gen"], reading["pcie_width"]
    top_gen, top_width = reading["pcie_max_gen"], reading["pcie_max_width"]
    if None in (gen, width, top_gen, top_width):
        return
    narrow = width < top_width
    slow = gen < top_gen and (reading["util"] or 0) >= BUSY_UTIL
    if narrow or slow:
        gen, width, top_gen, top_width = int(gen), int(width), int(top_gen), int(top_width)
        evidence = {
            "metric": _metric("pcie_width") if narrow else _metric("pcie_gen"),
            "pcie_gen": gen,
            "pcie_max_gen": top_gen,
            "pcie_width": width,
            "pcie_max_width": top_width,
        }
        summary = f"PCIe link downtrained to Gen{gen} x{width} (capable of Gen{top_gen} x{top_width})"
        yield "pcie_downtrained", Severity.MINOR, summary, evidence


def _missing(gpus: dict, values: dict, at: dt.datetime) -> list[HealthEvent]:
    """GPUs the inventory has on a node whose other GPUs report, that report nothing themselves: gone from the bus
    without the XID saying so (dcgm-exporter drops a GPU the driver lost)."""
    reporting = {host for host, _ in values["util"]} | {host for host, _ in values["xid"]}
    events = []
    for key, gpu in sorted(gpus.items()):
        if key[0] in reporting and key not in values["util"] and key not in values["xid"]:
            summary = "missing from the telemetry: the node's other GPUs report, this one does not (off the bus?)"
            evidence = {"metric": _metric("util"), "reported": False}
            events.append(_record(gpu, "gpu_missing", Severity.CRITICAL, summary, evidence, at))
    return events
