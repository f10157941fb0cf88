"""The telemetry watch's NVLink part (apps/monitoring/watch.py runs it every 30 s): the links each GPU reports
inactive (dcgm-exporter's per-link `DCGM_FI_DEV_NVLINK_GET_STATE`; the simulator's model embedded) become health
events, and are cleared when the links are active again.

- A rack-scale domain's switch tray is down when every GPU of the domain that reports (on two trays or more: one
  tray alone cannot tell its own links from the switch tray's) has lost all its links to it: ONE
  `nvlink_switch_tray_down` event on the switch tray, in no node, so none of the domain's compute trays is unhealthy
  or quarantined for it.
- Links down that no switch tray explains are `nvlink_degraded`: on the compute tray (its node) when every GPU of it
  lost the same links (its cable cartridge, its connectors), else on each GPU; the observation says `links_down` and,
  in a domain, `switch_tray` where the links all go to one (apps/health/nvlink.py reads both for the topology).

- A tray whose IMEX daemon reads UNAVAILABLE (`DCGM_FI_IMEX_DAEMON_STATUS` = 7; `nvidia-imex-ctl -N` on every tray
  shows the peer lost and the domain DEGRADED) is `imex_peer_lost` on that tray: memory exported over NVLink to or
  from it fails.

Unlike an XID, a link's state is measured every run: a link active again is the fault's end, not a fault gone quiet,
so the watch clears the events it recorded (by a validation: the reading is the evidence) when the GPU, every GPU of
the tray, or every GPU of the domain reports those links active; likewise `imex_peer_lost` when the tray's daemon
reads READY again."""

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable

from apps.health import services as health
from apps.health.choices import ClearedBy, ComponentType, Severity, Source
from apps.health.models import HealthEvent
from apps.health.nvlink import SWITCH_TRAY_DOWN
from apps.inventory.models import Gpu, NvlinkDomain
from apps.monitoring.telemetry import IMEX_DAEMON_METRIC, NVLINK_STATE_METRIC, TelemetryError

logger = logging.getLogger(__name__)

NVLINK_DEGRADED = "nvlink_degraded"
IMEX_PEER_LOST = "imex_peer_lost"
IMEX_READY, IMEX_UNAVAILABLE = 5, 7  # DCGM_FI_IMEX_DAEMON_STATUS (nvidia-imex-ctl -q)


def switch_tray_links(slot: int, per_tray: int) -> set[int]:
    """The links of every GPU that land on switch tray `slot`: each GPU's links spread evenly over the switch trays
    in slot order (links 0-1 on tray 1 of an NVL72, ...), as the inventory's RACK_SYSTEMS and the simulator count."""
    return set(range((slot - 1) * per_tray, slot * per_tray))


def watch_nvlinks(*, source, gpus: dict[tuple[str, str], Gpu], end: float, at: dt.datetime) -> list[HealthEvent]:
    """Record (and clear) the NVLink events of these GPUs ((hostname, index) -> Gpu, its node loaded) as the telemetry
    reports their links at `end`."""
    try:
        values = source.nvlink_values_now(hostnames=sorted({host for host, _ in gpus}), at=end)
    except TelemetryError as error:
        logger.warning("telemetry watch: the NVLink links' state could not be read: %s", error)
        return []
    reporting = {key: values[key] for key in sorted(gpus) if key in values}
    if not reporting:
        return []
    events, judged_domains, down_trays, explained = _switch_trays(gpus, reporting, at)
    lost: dict[int, dict[int, list[int]]] = defaultdict(dict)  # node id -> GPU index -> links down not explained
    for key, reading in reporting.items():
        gpu = gpus[key]
        lost[gpu.node_id][gpu.index] = sorted(set(reading["down"]) - explained.get(gpu.node.nvlink_domain_id, set()))
    inventoried = defaultdict(int)
    for gpu in gpus.values():
        inventoried[gpu.node_id] += 1
    by_index = {(gpu.node_id, gpu.index): gpu for gpu in gpus.values()}
    for node_id, by_gpu in sorted(lost.items()):
        faulty = {index: links for index, links in by_gpu.items() if links}
        if not faulty:
            continue
        node = by_index[(node_id, next(iter(faulty)))].node
        if len(faulty) == inventoried[node_id] > 1 and len({tuple(links) for links in faulty.values()}) == 1:
            links = next(iter(faulty.values()))
            events.append(_record_degraded(node, node, "every GPU of the tray lost", links, reporting, at))
        else:
            for index, links in sorted(faulty.items()):
                gpu = by_index[(node_id, index)]
                events.append(_record_degraded(gpu, node, f"GPU {index} lost", links, reporting, at))
    _clear(gpus, lost, judged_domains, down_trays, at)
    return events


def _switch_trays(gpus, reporting, at):
    """The switch trays down in the domains whose GPUs report: their events, the domains judged, the trays down, and
    per domain the links they explain."""
    members: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for key in reporting:
        if gpus[key].node.nvlink_domain_id is not None:
            members[gpus[key].node.nvlink_domain_id].append(key)
    events, judged, down, explained = [], set(), set(), defaultdict(set)
    for domain in NvlinkDomain.objects.filter(pk__in=list(members)).prefetch_related("switch_trays").order_by("name"):
        keys = members[domain.pk]
        trays = {host for host, _ in keys}
        if len(trays) < 2:
            continue
        judged.add(domain.pk)
        per = domain.spec.links_per_switch_tray
        for switch in domain.switch_trays.all():
            links = switch_tray_links(switch.slot, per)
            if not all(links <= set(reporting[key]["down"]) for key in keys):
                continue
            down.add(switch.pk)
            explained[domain.pk] |= links
            summary = (
                f"{switch.name} (switch tray {switch.slot} of {domain.name}) down: every GPU of the domain lost its "
                f"{per} links to it ({len(keys)} GPUs on {len(trays)} trays report)"
            )
            evidence = {"metric": NVLINK_STATE_METRIC, "switch_tray": switch.slot, "links": sorted(links)}
            events.append(_record(switch, SWITCH_TRAY_DOWN, Severity.MAJOR, summary, evidence, at))
    return events, judged, down, explained


def _record_degraded(component, node, who: str, links: list[int], reporting, at) -> HealthEvent:
    total = max(reading["links"] for (host, _), reading in reporting.items() if host == node.hostname)
    evidence = {"metric": NVLINK_STATE_METRIC, "links_down": len(links), "links": total, "down": links}
    towards = ""
    if node.nvlink_domain_id is not None:
        per = node.nvlink_domain.spec.links_per_switch_tray
        slots = {link // per + 1 for link in links}
        if len(slots) == 1:
            evidence["switch_tray"] = slots.pop()
            towards = f" to switch tray {evidence['switch_tray']}"
    summary = f"{who} {len(links)} of its {total} NVLink links{towards} (inactive: {_ranges(links)})"
    return _record(component, NVLINK_DEGRADED, Severity.MAJOR, summary, evidence, at)


def _clear(gpus, lost, judged_domains, down_trays, at) -> None:
    """The watch's own open events whose links every GPU concerned now reports active."""
    gpu_whole = {gpu.pk for gpu in gpus.values() if lost.get(gpu.node_id, {}).get(gpu.index) == []}
    inventoried = defaultdict(set)
    for gpu in gpus.values():
        inventoried[gpu.node_id].add(gpu.index)
    node_whole = {
        node_id for node_id, by_gpu in lost.items() if set(by_gpu) == inventoried[node_id] and not any(by_gpu.values())
    }

    def whole(event: HealthEvent) -> bool:
        if event.component_type == ComponentType.GPU:
            return event.gpu_id in gpu_whole
        if event.component_type == ComponentType.NODE:
            return event.node_id in node_whole
        if event.component_type == ComponentType.NVLINK_SWITCH_TRAY:
            tray = event.nvlink_switch_tray
            return tray.domain_id in judged_domains and tray.pk not in down_trays
        return False

    candidates = HealthEvent.objects.open().filter(kind__in=(NVLINK_DEGRADED, SWITCH_TRAY_DOWN))
    _clear_healthy(
        candidates.select_related("nvlink_switch_tray"),
        healthy=whole,
        reason="Telemetry watch: every NVLink link it concerns is active again.",
        validation={"metric": NVLINK_STATE_METRIC, "links_down": 0},
        at=at,
    )


def watch_imex(*, source, gpus: dict[tuple[str, str], Gpu], end: float, at: dt.datetime) -> list[HealthEvent]:
    """Record `imex_peer_lost` on each tray of these GPUs whose IMEX daemon reads UNAVAILABLE at `end`; clear the
    watch's own where it reads READY again."""
    nodes = {gpu.node.hostname: gpu.node for gpu in gpus.values() if gpu.node.nvlink_domain_id is not None}
    if not nodes:
        return []
    try:
        statuses = source.imex_values_now(hostnames=sorted(nodes), at=end)
    except TelemetryError as error:
        logger.warning("telemetry watch: the IMEX daemons' status could not be read: %s", error)
        return []
    events = []
    for hostname, status in sorted(statuses.items()):
        if status == IMEX_UNAVAILABLE and hostname in nodes:
            node = nodes[hostname]
            summary = (
                f"IMEX peer lost: {hostname}'s IMEX daemon is unavailable to the domain {node.nvlink_domain.name} "
                "(memory exported over NVLink to or from it fails)"
            )
            evidence = {"metric": IMEX_DAEMON_METRIC, "value": status}
            events.append(_record(node, IMEX_PEER_LOST, Severity.MAJOR, summary, evidence, at))
    ready = [nodes[host].pk for host, status in statuses.items() if status == IMEX_READY and host in nodes]
    _clear_healthy(
        HealthEvent.objects.open().filter(kind=IMEX_PEER_LOST, node__in=ready),
        reason="Telemetry watch: the tray's IMEX daemon is ready again.",
        validation={"metric": IMEX_DAEMON_METRIC, "value": IMEX_READY},
        at=at,
    )
    return events


def _record(component, kind: str, severity: str, summary: str, evidence: dict, at: dt.datetime) -> HealthEvent:
    """What the watch read now, on the component: a new open event of the kind, or folded into the open one."""
    return health.record_event(
        component=component,
        source=Source.TELEMETRY,
        kind=kind,
        severity=severity,
        summary=summary,
        evidence=evidence,
        at=at,
    )


def _clear_healthy(
    events, *, healthy: Callable[[HealthEvent], bool] | None = None, reason: str, validation: dict, at: dt.datetime
) -> None:
    """The watch's own open `events` that the reading at `at` shows healthy (all of them, or those `healthy(event)`
    says), cleared by validation: the reading (`validation`, with its time) is the evidence. An operator's or a
    runbook's event is not the watch's: what they measured is theirs to clear."""
    for event in events.order_by("pk"):
        if Source.TELEMETRY in event.sources and (healthy is None or healthy(event)):
            health.clear_event(
                event=event,
                by=ClearedBy.VALIDATION,
                reason=reason,
                validation={**validation, "at": at.isoformat()},
                at=at,
            )


def _ranges(links: list[int]) -> str:
    """Link indexes as runs: [4, 5, 14, 15, 16, 17] -> "4-5, 14-17"."""
    runs: list[list[int]] = []
    for link in links:
        if runs and link == runs[-1][-1] + 1:
            runs[-1].append(link)
        else:
            runs.append([link])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
