"""A rack's power: its budget, the full-load estimate from what is in it, and the draw measured where readings exist.

The estimate is the database's sum over the rack's GPUs of their SKU's TDP, plus a platform figure for every node
(CPUs, memory, NICs, fans at full load: PLATFORM_W for a host, TRAY_PLATFORM_W for a compute tray of a rack-scale
system's NVLink domain), plus SWITCH_TRAY_W for every NVLink switch tray of that domain (the measured draw counts those
trays too), so the racks list sorts by it in SQL. The measured draw comes from the apps above the inventory
(monitoring reads the BMCs of the nodes and of a rack-scale system's NVLink switch trays, and counts both): they
register a source from their AppConfig.ready(), as the node page's sections do, and a rack without recent readings has
no measured figure rather than a zero. A node its BMC reads powered off (`Node.power_state`) draws
nothing: the sources leave its readings out, and the rack counts it as off. To sort by the measured draw in the
database, the same app registers an annotation (`measured_w`, subqueries of the rack's nodes' and switch trays' latest
readings); without one every rack's `measured_w` is NULL and the sort keeps the default order.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db.models import (
    Case,
    Count,
    Expression,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from apps.inventory.choices import PowerState
from apps.inventory.models import Gpu, Node, NvlinkSwitchTray, Rack

# What a node draws at full load besides its GPUs (two CPUs, memory, NICs, drives, fans): an 8-GPU HGX host's share.
PLATFORM_W = 2000
# What a compute tray of a rack-scale system (a node of an NVLink domain: a GB200 NVL72's, liquid cooled) draws at full
# load besides its GPUs: two Grace CPUs at 250 W with their LPDDR5X, plus 616 W of the tray's own (four ConnectX-7 with
# their modules, two BlueField-3, four E1.S drives, BMC, fans). The figures are the simulated compute tray BMC's at full
# load (apps/simulator/bmc.py: TRAY_BOARD_W + 2 × GRACE_BUSY_W, which says which datasheet each comes from); they live
# here too because the inventory may not import the simulator, and a test (tests/inventory/test_rack_power.py) fails
# when the two part.
TRAY_PLATFORM_W = 2 * 250 + 616
# What an NVLink switch tray draws at full load (a GB200 NVL72's: its two NVSwitch chips at 420 W each under all-reduce
# traffic, plus 180 W of the tray's own management CPU, BMC, fans' and pumps' share and optics' cages). The figures are
# the simulated switch tray BMC's at full load (apps/simulator/bmc.py: SWITCH_BOARD_W + NVSWITCH_CHIPS ×
# NVSWITCH_BUSY_W), not a datasheet's; they live here too because the inventory may not import the simulator, and a
# test (tests/inventory/test_rack_power.py) fails when the two part.
SWITCH_TRAY_W = 2 * 420 + 180


@dataclass(frozen=True)
class Measured:
    watts: float
    nodes: int  # how many of the rack's nodes were read recently enough to count
    switch_trays: int = 0  # and how many of its NVLink switch trays (their own BMCs)


# rack ids -> {rack id: Measured}, for the racks that have recent readings
MeasuredSource = Callable[[list[int]], dict[int, Measured]]
_SOURCES: list[MeasuredSource] = []


def register_measured_source(source: MeasuredSource) -> None:
    if source not in _SOURCES:
        _SOURCES.append(source)


# () -> an expression of a rack's measured draw in watts (OuterRef("pk") is the rack), NULL without recent readings;
# called per query, so its window ends at the time of the query.
MeasuredAnnotation = Callable[[], Expression]
_ANNOTATION: list[MeasuredAnnotation] = []


def register_measured_annotation(annotation: MeasuredAnnotation) -> None:
    _ANNOTATION[:] = [annotation]


def with_measured(racks: QuerySet) -> QuerySet:
    """Racks annotated with `measured_w`, what their nodes' and switch trays' BMCs last read, for ORDER BY (the
    figures shown come from attach_power, which also counts what was read)."""
    draw = _ANNOTATION[0]() if _ANNOTATION else Value(None)
    return racks.annotate(measured_w=ExpressionWrapper(draw, output_field=FloatField()))


def with_power(racks: QuerySet) -> QuerySet:
    """Racks annotated with `node_count`, `nodes_off` (powered off through their BMC) and `full_load_w` (what they
    would draw at full load), as subqueries so no join multiplies rows or counts.

    The estimate's parts (`gpu_tdp_w`, `nodes_platform_w`, `switch_tray_count`) and `compute_trays` (the nodes at
    TRAY_PLATFORM_W) are aliases: `full_load_w` writes each part out once, so PostgreSQL runs each subquery once per
    rack (Django writes an annotation's subquery out again wherever another refers to it, and the planner does not
    share them); a query may still sort or filter by them, and with_power_parts fetches them."""
    gpu_tdp = (
        Gpu.objects.filter(node__rack=OuterRef("pk"), sku__isnull=False)
        .order_by()
        .values("node__rack")
        .annotate(total=Sum("sku__tdp_w"))
        .values("total")
    )
    nodes = Node.objects.filter(rack=OuterRef("pk")).order_by().values("rack")
    tray = Q(nvlink_domain__isnull=False)
    platform = Sum(Case(When(tray, then=Value(TRAY_PLATFORM_W)), default=Value(PLATFORM_W)))
    counted = nodes.annotate(n=Count("pk")).values("n")
    switch_trays = (
        NvlinkSwitchTray.objects.filter(domain__rack=OuterRef("pk"))
        .order_by()
        .values("domain__rack")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return racks.alias(
        gpu_tdp_w=_figure(gpu_tdp),
        nodes_platform_w=_figure(nodes.annotate(w=platform).values("w")),
        compute_trays=_figure(counted.filter(tray)),
        switch_tray_count=_figure(switch_trays),
    ).annotate(
        node_count=_figure(counted),
        nodes_off=_figure(counted.filter(power_state=PowerState.OFF)),
        full_load_w=F("gpu_tdp_w") + F("nodes_platform_w") + F("switch_tray_count") * SWITCH_TRAY_W,
    )


def with_power_parts(racks: QuerySet) -> QuerySet:
    """with_power, with the estimate's parts fetched too, as the rack page spells them out: `gpu_tdp_w`, `hosts` (the
    nodes at PLATFORM_W), `compute_trays` (at TRAY_PLATFORM_W) and `switch_tray_count`. Their subqueries run again
    beside `full_load_w`'s: for a rack's page, not a list."""
    return with_power(racks).annotate(
        gpu_tdp_w=F("gpu_tdp_w"),
        hosts=F("node_count") - F("compute_trays"),
        compute_trays=F("compute_trays"),
        switch_tray_count=F("switch_tray_count"),
    )


def _figure(subquery: QuerySet) -> Expression:
    """A per-rack subquery's one figure, 0 where it has no row (a rack without nodes, GPUs or switch trays)."""
    return Coalesce(Subquery(subquery, output_field=IntegerField()), Value(0))


@dataclass(frozen=True)
class RackPower:
    """What a rack page shows of its power, in watts."""

    budget_w: float
    full_load_w: int
    measured: Measured | None  # from the nodes that are not powered off, and the switch trays
    nodes: int = 0
    nodes_off: int = 0  # powered off through their BMC (Node.power_state): they draw nothing

    @property
    def nodes_on(self) -> int:
        return self.nodes - self.nodes_off

    @property
    def budget_kw(self) -> float:
        return round(self.budget_w / 1000, 2)

    @property
    def full_load_kw(self) -> float:
        return round(self.full_load_w / 1000, 2)

    @property
    def measured_w(self) -> float | None:
        return self.measured.watts if self.measured else None

    @property
    def measured_nodes(self) -> int:
        return self.measured.nodes if self.measured else 0

    @property
    def measured_switch_trays(self) -> int:
        return self.measured.switch_trays if self.measured else 0

    @property
    def measured_kw(self) -> float | None:
        return round(self.measured.watts / 1000, 2) if self.measured else None

    @property
    def full_load_over(self) -> bool:
        return self.full_load_w > self.budget_w

    @property
    def measured_over(self) -> bool:
        return self.measured is not None and self.measured.watts > self.budget_w

    @property
    def over_budget(self) -> bool:
        """At full load the rack would draw more than its budget, or it already does."""
        return self.full_load_over or self.measured_over


def attach_power(racks: Iterable[Rack]) -> list[Rack]:
    """Sets each rack's `power` (a RackPower), measured in one pass per source. Racks not annotated by with_power
    (one just saved) are read again for their estimate."""
    racks = list(racks)
    missing = [rack for rack in racks if not hasattr(rack, "full_load_w")]
    if missing:
        estimates = with_power(Rack.objects.filter(pk__in=[r.pk for r in missing])).values_list(
            "pk", "full_load_w", "node_count", "nodes_off"
        )
        by_pk = {pk: rest for pk, *rest in estimates}
        for rack in missing:
            rack.full_load_w, rack.node_count, rack.nodes_off = by_pk[rack.pk]
    found: dict[int, Measured] = {}
    for source in _SOURCES:
        found.update(source([rack.pk for rack in racks]))
    for rack in racks:
        rack.power = RackPower(
            float(rack.power_budget_kw) * 1000, rack.full_load_w, found.get(rack.pk), rack.node_count, rack.nodes_off
        )
    return racks
