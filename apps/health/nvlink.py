"""The NVLink links measured down or degraded in a rack-scale domain, as the topology rules count them: the open
`link_degraded` / `nvlink_degraded` events on a compute tray (its node) or one of its GPUs. An observation may say
which switch tray the links go to (`switch_tray`, its slot) and how many are down (`links_down`); the newest one that
says so is taken. Registered with apps/topology/nvlink.py from this app's ready()."""

from apps.health.choices import ComponentType
from apps.health.models import HealthEvent
from apps.topology.nvlink import LinkFault

NVLINK_FAULT_KINDS = ("link_degraded", "nvlink_degraded")


def link_faults() -> list[LinkFault]:
    events = (
        HealthEvent.objects.open()
        .filter(
            kind__in=NVLINK_FAULT_KINDS,
            component_type__in=(ComponentType.NODE, ComponentType.GPU),
            node__nvlink_domain__isnull=False,
        )
        .values_list("node__hostname", "gpu__index", "kind", "summary", "evidence")
        .order_by("pk")
    )
    return [
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


def _newest(evidence: list, key: str) -> int | None:
    for observation in reversed(evidence or []):
        value = observation.get(key) if isinstance(observation, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
