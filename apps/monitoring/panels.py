"""What the node page shows of a node's BMC: its latest readings, the power against its rack's budget, its settings."""

from collections import Counter
from dataclasses import replace
from datetime import timedelta

from django.db.models import FloatField, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.inventory.choices import PowerState
from apps.inventory.models import LeakSensor, Node, NvlinkSwitchTray
from apps.inventory.power import Measured
from apps.inventory.rackscale import LoopReadings, TrayCoolant
from apps.monitoring import charts
from apps.monitoring.bmc.gpu_names import with_gpu_index
from apps.monitoring.bmc.readings import (
    COOLANT_FLOW,
    COOLANT_PRESSURE,
    COOLANT_RETURN,
    COOLANT_SUPPLY,
    LEAKS,
    Reading,
    chassis_power,
)
from apps.monitoring.choices import SensorKind
from apps.monitoring.models import Bmc, BmcReading
from apps.monitoring.telemetry import Series

RACK_WINDOW = timedelta(minutes=10)  # a node's power counts toward its rack when read this recently
SERIES_WINDOW = timedelta(hours=24)  # the node page's BMC charts


def _power(readings) -> float | None:
    return chassis_power([Reading(r.kind, r.sensor, r.unit, r.value) for r in readings])


def racks_power(rack_ids: list[int]) -> dict[int, Measured]:
    """Each rack's draw from the latest readings within RACK_WINDOW of its nodes and of its NVLink switch trays (their
    own BMCs), for the racks that have any: the rack pages' measured source (apps/inventory/power.py). Two queries
    whatever the number of racks: the owners' latest poll times, then the readings at those times."""
    recent = BmcReading.objects.filter(kind=SensorKind.POWER, time__gte=timezone.now() - RACK_WINDOW)
    # A node powered off draws nothing, whatever it read before it went off.
    nodes_on = Q(node__rack_id__in=rack_ids) & ~Q(node__power_state=PowerState.OFF)
    mine = recent.filter(nodes_on | Q(switch_tray__domain__rack_id__in=rack_ids)).order_by()
    latest = {
        (node_id, tray_id): time
        for node_id, tray_id, time in mine.values_list("node_id", "switch_tray_id").annotate(latest=Max("time"))
    }
    by_owner: dict[tuple, list[Reading]] = {}
    rack_of: dict[tuple, int] = {}
    rows = mine.filter(time__in=set(latest.values())).values_list(
        "node_id",
        "switch_tray_id",
        "node__rack_id",
        "switch_tray__domain__rack_id",
        "time",
        "kind",
        "sensor",
        "unit",
        "value",
    )
    for node_id, tray_id, node_rack, tray_rack, time, kind, sensor, unit, value in rows:
        owner = (node_id, tray_id)
        if time == latest.get(owner):
            by_owner.setdefault(owner, []).append(Reading(kind, sensor, unit, value))
            rack_of[owner] = node_rack if node_id else tray_rack
    totals: dict[int, Measured] = {}
    for owner, readings in by_owner.items():
        watts = chassis_power(readings)
        if watts is not None:
            before = totals.get(rack_of[owner], Measured(0.0, 0))
            is_node = owner[0] is not None
            totals[rack_of[owner]] = Measured(
                before.watts + watts, before.nodes + is_node, before.switch_trays + (not is_node)
            )
    return totals


def rack_measured_w() -> Coalesce:
    """The rack's draw as one SQL expression, for sorting the racks list (power.with_measured): the same figure as
    racks_power, its nodes' (not powered off) and its switch trays' latest power polls within RACK_WINDOW summed;
    NULL when none of them was read."""
    since = timezone.now() - RACK_WINDOW
    nodes = _summed_power(
        Node.objects.filter(rack=OuterRef("pk")).exclude(power_state=PowerState.OFF), "node", "rack", since
    )
    trays = _summed_power(
        NvlinkSwitchTray.objects.filter(domain__rack=OuterRef("pk")), "switch_tray", "domain__rack", since
    )
    return Coalesce(nodes + trays, nodes, trays)


def _summed_power(owners, owner: str, rack: str, since) -> Subquery:
    """The sum over `owners` (a rack's nodes or switch trays) of each one's latest power poll since `since`: its
    whole-chassis sensor (the largest) when it has one, else the sum of its supplies; NULL when none was read."""
    polls = BmcReading.objects.filter(**{owner: OuterRef("pk")}, kind=SensorKind.POWER, time__gte=since).order_by()
    latest = polls.order_by("-time").values("time")[:1]
    at_latest = polls.filter(time=OuterRef("latest")).values(owner)
    supplies = Q(sensor__istartswith="PSU")
    whole = at_latest.exclude(supplies).annotate(w=Max("value")).values("w")
    summed = at_latest.filter(supplies).annotate(w=Sum("value")).values("w")
    total = (
        owners.order_by()
        .annotate(latest=Subquery(latest))
        .annotate(
            watts=Coalesce(Subquery(whole, output_field=FloatField()), Subquery(summed, output_field=FloatField()))
        )
        .values(rack)
        .annotate(total=Sum("watts"))
        .values("total")
    )
    return Subquery(total, output_field=FloatField())


def loops_coolant(loops) -> dict[int, LoopReadings]:
    """Each coolant loop's trays as their BMCs last read them (the poll records their coolant readings) within
    RACK_WINDOW: the compute trays', then the NVLink switch trays' (their leak detectors): the rack page's coolant
    source (apps/inventory/rackscale.py). A rack's trays count toward its first loop, as the poll's judgement does
    (apps/monitoring/bmc/coolant.py). Each loop read says how many of its leak sensors sit in switch trays without
    BMC settings, which no poll reads, and which sensors' trays have BMC settings but gave no reading in the window
    (an unreachable BMC, a refused login): a leak there would go unseen."""
    loop_of: dict[int, int] = {}
    for loop in sorted(loops, key=lambda loop: loop.name):
        loop_of.setdefault(loop.rack_id, loop.pk)
    found: dict[int, LoopReadings] = {}
    read = trays_coolant(node__rack_id__in=loop_of)
    read += trays_coolant(owner="switch_tray", switch_tray__domain__rack_id__in=loop_of)
    for rack_id, tray in read:
        found.setdefault(loop_of[rack_id], LoopReadings()).trays.append(tray)
    unset: Counter[int] = Counter()
    silent: dict[int, list[str]] = {}
    read = {loop_id: {tray.hostname for tray in readings.trays} for loop_id, readings in found.items()}
    sensors = LeakSensor.objects.filter(loop_id__in=found).order_by("name")
    for loop_id, name, hostname, tray_name, node_bmc, tray_bmc in sensors.values_list(
        "loop_id", "name", "node__hostname", "switch_tray__name", "node__bmc", "switch_tray__bmc"
    ):
        if tray_name is not None and tray_bmc is None:
            unset[loop_id] += 1
        elif (node_bmc is not None or tray_bmc is not None) and (hostname or tray_name) not in read[loop_id]:
            silent.setdefault(loop_id, []).append(name)
    for loop_id, readings in found.items():
        found[loop_id] = replace(readings, switch_trays_unread=unset[loop_id], silent=tuple(silent.get(loop_id, ())))
    return found


def node_coolant(node) -> dict:
    """The node page's coolant: a liquid-cooled node's (one in a rack with a coolant loop) own readings within
    RACK_WINDOW, beside the limits of the loop it is judged against, its rack's first (as loops_coolant counts it);
    nothing for an air-cooled node."""
    loop = node.rack.coolant_loops.order_by("name").first() if node.rack_id else None
    if loop is None:
        return {}
    trays = [tray for _, tray in trays_coolant(node=node)]
    return {"coolant_loop": loop, "coolant": LoopReadings(trays) if trays else None}


# How a tray's coolant series are found, by what the BMC belongs to: its id, name, slot and rack.
TRAY_FIELDS = {
    "node": ("node_id", "node__hostname", "node__tray_slot", "node__rack_id"),
    "switch_tray": ("switch_tray_id", "switch_tray__name", "switch_tray__slot", "switch_tray__domain__rack_id"),
}


def trays_coolant(owner: str = "node", **lookups) -> list[tuple[int, TrayCoolant]]:
    """(rack id, tray) for each node (or NVLink switch tray, `owner="switch_tray"`) the BmcReading lookups select, as
    its BMC last read its coolant within RACK_WINDOW, by tray slot: the one reading of the poll's coolant series for
    the rack page and the node page."""
    key, name, slot, rack = TRAY_FIELDS[owner]
    recent = BmcReading.objects.filter(kind=SensorKind.COOLANT, time__gte=timezone.now() - RACK_WINDOW, **lookups)
    latest = dict(recent.order_by().values_list(key).annotate(latest=Max("time")))
    by_tray: dict[tuple, dict[str, float]] = {}
    rows = recent.filter(time__in=set(latest.values())).order_by(slot, name)
    for owner_id, hostname, rack_id, time, sensor, value in rows.values_list(
        key, name, rack, "time", "sensor", "value"
    ):
        if time == latest[owner_id]:
            by_tray.setdefault((rack_id, hostname, time), {})[sensor] = value
    found = []
    for (rack_id, hostname, time), sensors in by_tray.items():
        leaks = sensors.get(LEAKS)
        tray = TrayCoolant(
            hostname=hostname,
            at=time,
            flow_lpm=sensors.get(COOLANT_FLOW),
            supply_c=sensors.get(COOLANT_SUPPLY),
            return_c=sensors.get(COOLANT_RETURN),
            pressure_kpa=sensors.get(COOLANT_PRESSURE),
            leaking=None if leaks is None else leaks > 0,
        )
        found.append((rack_id, tray))
    return found


def rack_power(rack) -> Measured:
    """The rack's draw from its nodes' and switch trays' latest readings within RACK_WINDOW, with how many of each."""
    return racks_power([rack.pk]).get(rack.pk, Measured(0.0, 0))


def bmc_series(node, *, since) -> tuple[dict[str, list[Series]], Series]:
    """The node's stored readings since `since`: one series a sensor by kind, and its chassis power at each poll."""
    rows = (
        BmcReading.objects.filter(node=node, time__gte=since)
        .order_by("time")
        .values_list("time", "kind", "sensor", "unit", "value")
    )
    by_sensor: dict[tuple[str, str], Series] = {}
    polls: dict[float, list[Reading]] = {}
    for time, kind, sensor, unit, value in rows:
        t = time.timestamp()
        named = with_gpu_index(sensor, source="BMC")
        by_sensor.setdefault((kind, sensor), Series({"sensor": named, "unit": unit})).points.append((t, value))
        polls.setdefault(t, []).append(Reading(kind, sensor, unit, value))
    by_kind: dict[str, list[Series]] = {}
    for (kind, _), series in sorted(by_sensor.items()):
        by_kind.setdefault(kind, []).append(series)
    power = Series({"sensor": "chassis"}, [(t, w) for t, w in ((t, chassis_power(r)) for t, r in polls.items()) if w])
    return by_kind, power


def node_bmc_context(node, request) -> dict:
    bmc = Bmc.objects.filter(node=node).first()
    readings = BmcReading.objects.latest_per_sensor(node)
    for reading in readings:  # 'GPU4 Temp' beside the page's GPU 3: the index it is (bmc/gpu_names.py)
        reading.label = with_gpu_index(reading.sensor, source="BMC")
    context = {
        "node": node,
        "bmc": bmc,
        "polled": readings[0].time if readings else None,
        "temperatures": [r for r in readings if r.kind == SensorKind.TEMPERATURE],
        "fans": [r for r in readings if r.kind == SensorKind.FAN],
        "power_readings": [r for r in readings if r.kind == SensorKind.POWER],
        "node_power_w": _power(readings),
        "may_edit": request.user.is_authenticated and request.user.is_operator,
    }
    if node.rack_id:
        measured = rack_power(node.rack)
        watts = measured.watts
        budget = float(node.rack.power_budget_kw) * 1000
        context |= {
            "rack_power_w": watts,
            "rack_nodes_counted": measured.nodes,
            "rack_switch_trays_counted": measured.switch_trays,
            "rack_budget_w": budget,
            "rack_share": round(watts / budget * 100, 1) if budget else None,
        }
    context |= node_coolant(node)
    by_kind, power = bmc_series(node, since=timezone.now() - SERIES_WINDOW)
    if power.points or by_kind:
        nodes_in_rack = node.rack.nodes.count() if node.rack_id else 0
        share = context.get("rack_budget_w", 0) / nodes_in_rack if nodes_in_rack else None
        context["bmc_figures"] = {
            "bmc-temperature": charts.figure_json(
                charts.sensor_lines(by_kind.get(SensorKind.TEMPERATURE, []), title="Temperatures (24 h)", y_title="°C")
            ),
            "bmc-fans": charts.figure_json(
                charts.sensor_lines(by_kind.get(SensorKind.FAN, []), title="Fans (24 h)", y_title="RPM / %")
            ),
            "bmc-power": charts.figure_json(
                charts.power_against_budget(power, share_w=share, rack=str(node.rack or ""))
            ),
        }
    return context
