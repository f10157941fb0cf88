"""Whether each rack-scale domain is whole and consistent, across rows no one row can judge: every compute tray and
switch tray of its system there, each tray with its GPUs, partitions and IMEX domains inside the domain. The import
refuses a document that leaves a domain inconsistent; topology's rules report the same for what is stored."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from apps.core.text import echo, noun
from apps.inventory.choices import PowerState
from apps.inventory.models import CoolantLoop, Gpu, ImexDomain, Node, NvlinkDomain, NvlinkPartition, Rack


@dataclass(frozen=True)
class DomainProblem:
    """One inconsistency, on the object it names (`section` and `name` as the import document calls them)."""

    section: str
    name: str
    field: str | None
    message: str


def domain_problems(domains=None) -> list[DomainProblem]:
    """What is wrong with the given NVLink domains (default: all), in a fixed number of queries."""
    domains = list((domains if domains is not None else NvlinkDomain.objects.all()).prefetch_related("switch_trays"))
    ids = [domain.pk for domain in domains]
    trays: dict[int, list[Node]] = {pk: [] for pk in ids}
    for node in Node.objects.filter(nvlink_domain_id__in=ids).order_by("tray_slot"):
        trays[node.nvlink_domain_id].append(node)
    gpus = _gpus_per_node([node.pk for nodes in trays.values() for node in nodes])
    problems = []
    for domain in domains:
        spec = domain.spec
        missing = sorted(set(range(1, spec.switch_trays + 1)) - {tray.slot for tray in domain.switch_trays.all()})
        if missing:
            slots = ", ".join(map(str, missing))
            problems.append(
                _on(
                    domain,
                    f"{spec.name} domain {echo(domain.name)} lacks switch tray {noun(len(missing), 'slot')} {slots}.",
                )
            )
        missing = sorted(set(range(1, spec.compute_trays + 1)) - {node.tray_slot for node in trays[domain.pk]})
        if missing:
            slots = ", ".join(map(str, missing))
            problems.append(
                _on(
                    domain,
                    f"{spec.name} domain {echo(domain.name)} lacks compute tray {noun(len(missing), 'slot')} {slots}.",
                )
            )
        for node in trays[domain.pk]:
            count = gpus.get(node.pk, 0)
            if count > spec.gpus_per_tray:
                message = (
                    f"{echo(node.hostname)} holds {count} GPUs; a {spec.name} compute tray has {spec.gpus_per_tray}."
                )
                problems.append(DomainProblem("nodes", node.hostname, "nvlink_domain", message))
    problems += _spanning(NvlinkPartition, "nvlink_partitions", ids, "NVLink partition")
    problems += _spanning(ImexDomain, "imex_domains", ids, "IMEX domain")
    return problems


def _on(domain: NvlinkDomain, message: str) -> DomainProblem:
    return DomainProblem("nvlink_domains", domain.name, None, message)


def _gpus_per_node(node_ids: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for node_id in Gpu.objects.filter(node_id__in=node_ids).values_list("node_id", flat=True):
        counts[node_id] = counts.get(node_id, 0) + 1
    return counts


def _spanning(model, section: str, domain_ids: list[int], label: str) -> list[DomainProblem]:
    """Members (compute trays) of a partition or IMEX domain that are not trays of its NVLink domain."""
    problems = []
    for group in model.objects.filter(domain_id__in=domain_ids).select_related("domain").prefetch_related("nodes"):
        strays = sorted(node.hostname for node in group.nodes.all() if node.nvlink_domain_id != group.domain_id)
        if strays:
            names = ", ".join(echo(name) for name in strays)
            message = f"{label} {echo(group.name)} reaches {names}, outside NVLink domain {echo(group.domain.name)}."
            problems.append(DomainProblem(section, group.name, "nodes", message))
    return problems


@dataclass(frozen=True)
class TrayCoolant:
    """One tray's coolant inlet and leak detectors as its BMC last read them."""

    hostname: str
    at: datetime
    flow_lpm: float | None
    supply_c: float | None
    return_c: float | None
    pressure_kpa: float | None
    leaking: bool | None  # None: no leak detector read


@dataclass(frozen=True)
class LoopReadings:
    """A coolant loop now, from its trays' latest BMC readings: the flow is theirs summed, the temperatures and the
    pressure drop the highest a tray reads (what its limits are judged against, apps/monitoring/bmc/coolant.py)."""

    trays: list[TrayCoolant] = field(default_factory=list)
    switch_trays_unread: int = 0  # the loop's leak sensors in NVLink switch trays without BMC settings: never read
    silent: tuple[str, ...] = ()  # its leak sensors whose tray's BMC has settings but gave no reading (unreachable)

    def _values(self, name: str) -> list[float]:
        return [value for tray in self.trays if (value := getattr(tray, name)) is not None]

    @property
    def at(self) -> datetime | None:
        return max((tray.at for tray in self.trays), default=None)

    @property
    def flow_lpm(self) -> float | None:
        flows = self._values("flow_lpm")
        return round(sum(flows), 1) if flows else None

    @property
    def supply_c(self) -> float | None:
        return max(self._values("supply_c"), default=None)

    @property
    def return_c(self) -> float | None:
        return max(self._values("return_c"), default=None)

    @property
    def pressure_kpa(self) -> float | None:
        return max(self._values("pressure_kpa"), default=None)

    @property
    def sensors_read(self) -> int:
        return sum(tray.leaking is not None for tray in self.trays)

    @property
    def leaking(self) -> list[str]:
        return [tray.hostname for tray in self.trays if tray.leaking]


# loops -> {loop id: LoopReadings} for the loops with recent readings: registered by the app that reads the trays'
# BMCs (monitoring), which the inventory may not import.
CoolantSource = Callable[[list[CoolantLoop]], dict[int, LoopReadings]]
_COOLANT_SOURCES: list[CoolantSource] = []


def register_coolant_source(source: CoolantSource) -> None:
    if source not in _COOLANT_SOURCES:
        _COOLANT_SOURCES.append(source)


def loop_readings(loops: list[CoolantLoop]) -> dict[int, LoopReadings]:
    found: dict[int, LoopReadings] = {}
    for source in _COOLANT_SOURCES:
        found.update(source(loops))
    return found


def rack_scale_summary(rack: Rack) -> dict | None:
    """What the rack page shows of a rack-scale rack: its domain against its system, its trays, power shelves,
    coolant loops with their leak sensors, and what is inconsistent; None for a rack of servers."""
    domain = NvlinkDomain.objects.filter(rack=rack).first()
    shelves = list(rack.power_shelves.order_by("position", "name"))
    loops = list(rack.coolant_loops.prefetch_related("leak_sensors").order_by("name"))
    if domain is None and not shelves and not loops:
        return None
    readings = loop_readings(loops)
    for loop in loops:
        loop.readings = readings.get(loop.pk)  # now, beside its design limits
        sensors = loop.leak_sensors.all()
        loop.switch_tray_sensors = sum(sensor.switch_tray_id is not None for sensor in sensors)
        loop.compute_tray_sensors = len(sensors) - loop.switch_tray_sensors
    summary = {"domain": domain, "power_shelves": shelves, "coolant_loops": loops, "problems": []}
    if domain is not None:
        summary.update(
            compute_trays=domain.compute_trays.count(),
            trays_off=domain.compute_trays.filter(power_state=PowerState.OFF).count(),
            switch_trays=list(domain.switch_trays.order_by("slot")),
            partitions=list(domain.partitions.order_by("partition_id")),
            imex_domains=list(domain.imex_domains.order_by("name")),
            problems=domain_problems(NvlinkDomain.objects.filter(pk=domain.pk)),
        )
    summary["shelf_capacity_kw"] = round(sum(shelf.capacity_w for shelf in shelves) / 1000, 1)
    return summary
