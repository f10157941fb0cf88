"""A liquid-cooled tray's coolant, as its BMC's poll read it, judged against its rack's coolant loop and recorded in
the health loop (docs/monitoring.md, "Coolant and leaks"): a leak detector that says a leak is `coolant_leak`
(critical) on the tray's leak sensor; a flow below FLOW_LOW_SHARE of the tray's share of the loop's design flow is
`coolant_flow_low`, a supply or return above the loop's limit `coolant_temperature_high`, a pressure drop above it
`coolant_pressure_high` (major), on the tray's coolant. Each observation carries the reading and the threshold.

An NVLink switch tray's BMC reads its leak detectors too: a leak there is `coolant_leak` on the switch tray's leak
sensor (in no node, as the switch tray's events are; remediation powers its domain's trays off all the same).

Nothing here clears an event: a leak, once seen, waits for a person (docs/health.md)."""

from datetime import datetime

from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import CoolantLoop, LeakSensor, Node, NvlinkSwitchTray
from apps.monitoring.bmc.readings import Coolant, PollOutcome
from apps.monitoring.choices import PollResult

FLOW_LOW_SHARE = 0.8  # below 80 % of its design flow a tray's cold plates run hot (its BMC says Warning there too)


def judge_coolant(*, outcomes: dict[int, PollOutcome], at: datetime) -> list[HealthEvent]:
    """Records the coolant faults the polls read (node id -> outcome); returns the events recorded or folded."""
    cooled = _read(outcomes)
    if not cooled:
        return []
    nodes = list(Node.objects.filter(pk__in=cooled).select_related("nvlink_domain").order_by("hostname"))
    loops: dict[int, CoolantLoop] = {}
    for loop in CoolantLoop.objects.filter(rack_id__in={node.rack_id for node in nodes}).order_by("name"):
        loops.setdefault(loop.rack_id, loop)
    sensors: dict[int, LeakSensor] = {}
    for sensor in LeakSensor.objects.filter(node_id__in=cooled).order_by("name"):
        sensors.setdefault(sensor.node_id, sensor)
    trays_per_rack = _trays_per_rack(nodes)
    events = []
    for node in nodes:
        loop = loops.get(node.rack_id)
        for fault in _faults(node, cooled[node.pk], loop, sensors, trays_per_rack):
            events.append(_record(fault, loop, at))
    return events


def judge_switch_tray_leaks(*, outcomes: dict[int, PollOutcome], at: datetime) -> list[HealthEvent]:
    """Records the leaks NVLink switch trays' BMCs read (switch tray id -> outcome) on each switch tray's leak sensor
    (the switch tray itself where none is inventoried); returns the events recorded or folded."""
    leaking = {tray_id: coolant for tray_id, coolant in _read(outcomes).items() if coolant.leaking}
    events = []
    for tray in NvlinkSwitchTray.objects.filter(pk__in=leaking).select_related("domain").order_by("name"):
        sensor, loop = _switch_tray_sensor(tray)
        component = health.Component.leak_sensor(sensor, None) if sensor else health.Component.of(tray)
        events.append(_record(_leak(component, f"switch tray {tray.name}", sensor, leaking[tray.pk]), loop, at))
    return events


def _read(outcomes: dict[int, PollOutcome]) -> dict[int, Coolant]:
    """The coolant of the polls that read their BMC (owner id -> coolant), for the liquid-cooled ones."""
    return {
        owner_id: outcome.coolant
        for owner_id, outcome in outcomes.items()
        if outcome.coolant is not None and outcome.result in (PollResult.OK, PollResult.PARTIAL)
    }


def _record(fault, loop: CoolantLoop | None, at: datetime) -> HealthEvent:
    """One fault (component, kind, severity, summary, evidence) in the health loop, naming the loop it is judged in."""
    component, kind, severity, summary, evidence = fault
    return health.record_event(
        component=component,
        source=Source.BMC_SENSORS,
        kind=kind,
        severity=severity,
        summary=summary,
        evidence={"loop": loop.name if loop else "", **evidence},
        at=at,
    )


def _switch_tray_sensor(tray: NvlinkSwitchTray) -> tuple[LeakSensor | None, CoolantLoop | None]:
    """The switch tray's leak sensor (None where none is inventoried) and the loop its leak is in."""
    sensor = LeakSensor.objects.filter(switch_tray=tray).select_related("loop", "switch_tray").order_by("name").first()
    if sensor is not None:
        return sensor, sensor.loop
    return None, CoolantLoop.objects.filter(rack_id=tray.domain.rack_id).order_by("name").first()


def _leak(component, tray: str, sensor, coolant: Coolant):
    """A leak its detectors read in a tray (a compute tray's host name, or "switch tray <name>"): the fault."""
    where = f"{tray}'s leak sensor {sensor.name}" if sensor else f"{tray}'s leak detector"
    return (
        component,
        "coolant_leak",
        Severity.CRITICAL,
        f"Coolant leak: {where} reads a leak ({', '.join(coolant.leaking)})",
        {"detectors": list(coolant.leaking), "reading": "leak", "threshold": "no leak"},
    )


def _trays_per_rack(nodes: list[Node]) -> dict[int, int]:
    """How many trays share each rack's loop: its system's compute trays, else its nodes."""
    counts: dict[int, int] = {}
    for node in nodes:
        if node.nvlink_domain_id:
            counts[node.rack_id] = node.nvlink_domain.spec.compute_trays
    for rack_id in {node.rack_id for node in nodes} - set(counts):
        counts[rack_id] = Node.objects.filter(rack_id=rack_id).count()
    return counts


def _faults(node: Node, coolant: Coolant, loop, sensors, trays_per_rack):
    if coolant.leaking:
        sensor = sensors.get(node.pk)
        component = health.Component.leak_sensor(sensor, node) if sensor else health.Component.coolant(node)
        yield _leak(component, node.hostname, sensor, coolant)
    if loop is None:
        return  # no loop inventoried: nothing to judge the figures against
    part = health.Component.coolant(node)
    design = float(loop.design_flow_lpm) / max(1, trays_per_rack.get(node.rack_id, 1))
    floor = round(design * FLOW_LOW_SHARE, 2)
    if coolant.flow_lpm is not None and coolant.flow_lpm < floor:
        yield (
            part,
            "coolant_flow_low",
            Severity.MAJOR,
            f"Coolant flow {coolant.flow_lpm:g} l/min into {node.hostname}, below {floor:g} l/min "
            f"({FLOW_LOW_SHARE:.0%} of its {design:g} l/min share of {loop.name})",
            {"reading": coolant.flow_lpm, "threshold": floor, "unit": "l/min"},
        )
    for name, value, limit in (
        ("supply", coolant.supply_c, float(loop.max_supply_c)),
        ("return", coolant.return_c, float(loop.max_return_c)),
    ):
        if value is not None and value > limit:
            yield (
                part,
                "coolant_temperature_high",
                Severity.MAJOR,
                f"Coolant {name} {value:g} °C at {node.hostname}, above {loop.name}'s {limit:g} °C",
                {"reading": value, "threshold": limit, "unit": "°C", "sensor": name},
            )
    if coolant.delta_pressure_kpa is not None and coolant.delta_pressure_kpa > loop.max_pressure_kpa:
        yield (
            part,
            "coolant_pressure_high",
            Severity.MAJOR,
            f"Coolant pressure {coolant.delta_pressure_kpa:g} kPa at {node.hostname}, above {loop.name}'s "
            f"{loop.max_pressure_kpa} kPa",
            {"reading": coolant.delta_pressure_kpa, "threshold": loop.max_pressure_kpa, "unit": "kPa"},
        )
