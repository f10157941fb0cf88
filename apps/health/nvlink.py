"""The NVLink links measured down or degraded in a rack-scale domain, as the topology rules count them: the open
`link_degraded` / `nvlink_degraded` events on a compute tray (its node) or one of its GPUs, and the open
`nvlink_switch_tray_down` events on a switch tray (every GPU of the domain lost its links to it). An observation may
say which switch tray the links go to (`switch_tray`, its slot) and how many are down (`links_down`); the newest one
that says so is taken. Registered with apps/topology/nvlink.py from this app's ready()."""

from apps.health.choices import ComponentType
from apps.health.models import HealthEvent
from apps.topology.nvlink import LinkFault

NVLINK_FAULT_KINDS = ("link_degraded", "nvlink_degraded")
SWITCH_TRAY_DOWN = "nvlink_switch_tray_down"  # one fault on the switch tray, not one on each compute tray


def link_faults() -> list[LinkFault]:
    open_events = HealthEvent.objects.open()
    events = (
        open_events.filter(
            kind__in=NVLINK_FAULT_KINDS,
            component_type__in=(ComponentType.NODE, ComponentType.GPU),
            node__nvlink_domain__isnull=False,
        )
        .values_list("node__hostname", "gpu__index", "kind", "summary", "evidence")
        .order_by("pk")
    )
    faults = [
        LinkFault(
            hostname=hostname,
            gpu_index=gpu_index,
            switch_slot=_newest(evidence, "switch_tray"),
            links_down=_newest(evidence, "links_down"),
            kind=kind,
            summary=summary,
        )
        for hostname, gpu_index, kind, summary, evidence in events
    ]
    trays = (
        open_events.filter(kind=SWITCH_TRAY_DOWN, nvlink_switch_tray__isnull=False)
        .values_list(
            "nvlink_switch_tray__name", "nvlink_switch_tray__slot", "nvlink_switch_tray__domain__name", "summary"
        )
        .order_by("pk")
    )
    faults += [
        LinkFault(name, None, slot, None, SWITCH_TRAY_DOWN, summary, domain=domain)
        for name, slot, domain, summary in trays
    ]
    return faults


def _newest(evidence: list, key: str) -> int | None:
    for observation in reversed(evidence or []):
        value = observation.get(key) if isinstance(observation, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
