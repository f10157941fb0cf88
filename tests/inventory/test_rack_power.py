"""A rack's power (apps/inventory/power.py): the budget, the full-load estimate from its GPUs' SKUs, its nodes (a
rack-scale system's compute trays at their own figure) and its NVLink switch trays, the draw its nodes' and NVLink
switch trays' BMCs last read; over budget in red on the pages, and the same figures, typed, in GET /api/racks/."""

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.inventory import power
from apps.inventory.models import GpuSku, NvlinkDomain, NvlinkSwitchTray, Rack
from apps.monitoring.models import BmcReading
from tests.factories import make_gpu, make_node, make_rack, make_switch

pytestmark = [pytest.mark.usefixtures("clock"), pytest.mark.django_db]  # readings stamped at the test's moment


@pytest.fixture
def rack():
    """Two nodes of four H200s (TDP from the shipped SKU), one empty node, a 20 kW budget."""
    rack = make_rack(name="p01", power_budget_kw=Decimal("20"))
    for number in range(2):
        node = make_node(hostname=f"pw{number}", rack=rack)
        for index in range(4):
            make_gpu(node=node, index=index)  # an H200 SXM
    make_node(hostname="pw-empty", rack=rack)
    return rack


def _read(node, watts: float, *, age: timedelta = timedelta(minutes=1), sensor: str = "DCMI Power"):
    BmcReading.objects.create(node=node, time=timezone.now() - age, kind="power", sensor=sensor, unit="W", value=watts)


def _read_switch_tray(tray, watts: float, *, age: timedelta = timedelta(minutes=1)):
    """What the poll stores of a switch tray's Redfish EnvironmentMetrics PowerWatts."""
    time = timezone.now() - age
    BmcReading.objects.create(switch_tray=tray, time=time, kind="power", sensor="Power Consumed", unit="W", value=watts)


def _rack(rack) -> Rack:
    """The rack as its page reads it: the estimate with its parts, and the measured draw."""
    return power.attach_power(power.with_power_parts(Rack.objects.filter(pk=rack.pk)))[0]


def test_the_full_load_estimate_is_the_gpus_tdp_and_a_platform_figure_per_node(rack):
    tdp = GpuSku.objects.get(name="H200 SXM").tdp_w
    figures = _rack(rack)
    assert figures.node_count == 3 and figures.gpu_tdp_w == 8 * tdp and figures.switch_tray_count == 0
    assert figures.power.full_load_w == 8 * tdp + 3 * power.PLATFORM_W  # no NVLink domain: nothing more
    assert figures.power.budget_w == 20000.0
    assert figures.power.measured is None and figures.power.measured_w is None


def test_the_measured_draw_is_each_nodes_latest_recent_reading(rack):
    first, second = rack.nodes.order_by("hostname")[:2]
    _read(first, 900.0, age=timedelta(minutes=5))
    _read(first, 4100.0)  # the latest reading counts, not the earlier one
    _read(second, 3900.0)
    _read(rack.nodes.get(hostname="pw-empty"), 5000.0, age=timedelta(hours=2))  # too old to count
    figures = _rack(rack)
    assert figures.power.measured_w == 8000.0 and figures.power.measured_nodes == 2
    assert not figures.power.measured_over


def test_over_budget_shows_red_on_the_list_and_the_rack_page(browser_as, viewer, rack):
    tdp = GpuSku.objects.get(name="H200 SXM").tdp_w
    rack.power_budget_kw = Decimal(8 * tdp + 3 * power.PLATFORM_W - 100) / 1000  # just under the full load
    rack.save()
    page = browser_as(viewer)
    detail = page.get(reverse("rack-detail", args=[rack.public_id])).content.decode()
    assert 'id="rack-power"' in detail and "badge red" in detail and "over budget" in detail
    listed = page.get(reverse("rack-list")).content.decode()
    assert 'class="over-budget"' in listed
    rack.power_budget_kw = Decimal("100")
    rack.save()
    assert "over budget" not in page.get(reverse("rack-detail", args=[rack.public_id])).content.decode()
    node = rack.nodes.get(hostname="pw0")
    _read(node, 101_000.0)  # the measured draw alone can be over
    detail = page.get(reverse("rack-detail", args=[rack.public_id])).content.decode()
    assert "101.0 kW · over budget" in detail


def test_the_racks_list_sorts_by_full_load_and_exports_the_figures(browser_as, viewer, rack):
    small = make_rack(name="p02", power_budget_kw=Decimal("5"))
    make_node(hostname="lonely", rack=small)
    _read(rack.nodes.get(hostname="pw1"), 2500.0)
    page = browser_as(viewer)
    down = page.get(reverse("rack-list"), {"sort": "-full_load_kw"})
    assert [r.name for r in down.context["object_list"]][:2] == ["p01", "p02"]
    rows = list(
        csv.DictReader(
            io.StringIO(
                b"".join(
                    page.get(reverse("rack-list"), {"sort": "full_load_kw", "export": "csv"}).streaming_content
                ).decode()
            )
        )
    )
    by_name = {row["name"]: row for row in rows}
    assert by_name["p02"]["full_load_kw"] == str(power.PLATFORM_W / 1000)
    assert by_name["p01"]["measured_kw"] == "2.5" and by_name["p02"]["measured_kw"] == ""
    assert [row["name"] for row in rows].index("p02") < [row["name"] for row in rows].index("p01")


def test_the_rack_api_gives_the_same_figures_typed_and_orders_by_them(api_as, viewer, admin, rack):
    _read(rack.nodes.get(hostname="pw0"), 3000.0)
    expected = _rack(rack).power
    client = api_as(viewer)
    body = client.get(f"/api/racks/{rack.public_id}/").json()
    assert body["power"] == {
        "budget_w": 20000.0,
        "full_load_w": expected.full_load_w,
        "measured_w": 3000.0,
        "measured_nodes": 1,
        "measured_switch_trays": 0,
        "over_budget": expected.over_budget,
    }
    make_rack(name="p03", power_budget_kw=Decimal("1"))
    listed = client.get("/api/racks/", {"ordering": "-full_load_w"}).json()["results"]
    assert [row["name"] for row in listed] == ["p01", "p03"]
    by_gpus = client.get("/api/racks/", {"ordering": "gpu_tdp_w"}).json()["results"]  # a part of the estimate
    assert [row["name"] for row in by_gpus] == ["p03", "p01"]
    assert listed[1]["power"]["measured_w"] is None and listed[1]["power"]["full_load_w"] == 0
    changed = api_as(admin).patch(f"/api/racks/{rack.public_id}/", {"power_budget_kw": "1.0"}, format="json")
    assert changed.status_code == 200 and changed.json()["power"]["over_budget"] is True


def _rack_scale(name: str, *, switch_trays: int) -> tuple[Rack, list[NvlinkSwitchTray]]:
    """A rack-scale rack with one compute tray (without GPUs) in its NVLink domain and `switch_trays` switch trays."""
    rack = make_rack(name=name, power_budget_kw=Decimal("130"))
    domain = NvlinkDomain.objects.create(name=name, rack=rack, system="GB200 NVL72")
    make_node(hostname=f"{name}-t01", rack=rack, nvlink_domain=domain, tray_slot=1)
    trays = [
        NvlinkSwitchTray.objects.create(name=f"{name}-sw{slot}", domain=domain, slot=slot)
        for slot in range(1, switch_trays + 1)
    ]
    return rack, trays


def test_a_racks_switch_trays_read_by_their_own_bmcs_count_in_its_draw_its_text_and_its_sort(
    browser_as, api_as, viewer, rack
):
    nvl, trays = _rack_scale("nvl09", switch_trays=3)
    _read(nvl.nodes.get(), 1000.0)
    _read_switch_tray(trays[0], 900.0, age=timedelta(minutes=5))
    _read_switch_tray(trays[0], 1200.0)  # its latest reading counts, not the earlier one
    _read_switch_tray(trays[1], 1100.0)
    _read_switch_tray(trays[2], 5000.0, age=timedelta(hours=2))  # too old to count
    _read(rack.nodes.get(hostname="pw0"), 3000.0)  # p01: more than nvl09's node, less than it with its switch trays

    figures = _rack(nvl).power
    assert (figures.measured_w, figures.measured_nodes, figures.measured_switch_trays) == (3300.0, 1, 2)
    page = browser_as(viewer)
    detail = page.get(reverse("rack-detail", args=[nvl.public_id])).content.decode()
    assert "3.3 kW" in detail and "from 1 of the 1 tray on and 2 switch trays, read by their BMC" in detail
    listed = page.get(reverse("rack-list"), {"sort": "-measured_kw"})
    assert [r.name for r in listed.context["object_list"]][:2] == ["nvl09", "p01"]
    assert "(1 node, 2 switch trays)" in listed.content.decode()
    body = api_as(viewer).get(f"/api/racks/{nvl.public_id}/").json()["power"]
    assert (body["measured_w"], body["measured_nodes"], body["measured_switch_trays"]) == (3300.0, 1, 2)


def test_a_rack_whose_switch_trays_alone_were_read_has_their_draw_and_sorts_by_it(rack):
    nvl, trays = _rack_scale("nvl09", switch_trays=2)
    for tray in trays:
        _read_switch_tray(tray, 1300.0)

    assert _rack(nvl).power.measured == power.Measured(2600.0, 0, 2)
    sorted_racks = power.with_measured(Rack.objects.all()).order_by("pk")
    assert {r.name: r.measured_w for r in sorted_racks} == {"p01": None, "nvl09": 2600.0}


def test_a_rack_scale_racks_switch_trays_count_at_full_load_on_the_list_the_page_the_api_and_the_dashboard(
    browser_as, api_as, viewer, rack
):
    nvl, _ = _rack_scale("nvl09", switch_trays=9)  # one compute tray without GPUs, an NVL72's nine switch trays
    servers = make_rack(name="p02", power_budget_kw=Decimal("20"))
    for number in range(5):
        make_node(hostname=f"p02-n{number}", rack=servers)
    full_load = power.TRAY_PLATFORM_W + 9 * power.SWITCH_TRAY_W
    # p01 (8 H200s, 3 nodes) above nvl09 (10.3 kW) above p02 (five nodes, 10 kW); nvl09 would be last without its
    # switch trays.
    assert _rack(rack).power.full_load_w > full_load > 5 * power.PLATFORM_W

    figures = _rack(nvl)
    assert (figures.compute_trays, figures.switch_tray_count, figures.power.full_load_w) == (1, 9, full_load)
    assert [r.name for r in power.with_power(Rack.objects.all()).order_by("-full_load_w")] == ["p01", "nvl09", "p02"]
    page = browser_as(viewer)
    detail = page.get(reverse("rack-detail", args=[nvl.public_id])).content.decode()
    parts = "0 W of GPUs at their TDP + 1 compute tray × 1116 W + 9 switch trays × 1020 W, at full load"
    assert "10.3 kW" in detail and parts in detail
    listed = page.get(reverse("rack-list"), {"sort": "-full_load_kw"})
    assert [r.name for r in listed.context["object_list"]] == ["p01", "nvl09", "p02"]
    text = listed.content.decode()
    assert "2000 W of platform per node (1116 W per compute tray of a rack-scale system) and 1020 W per NVLink" in text
    client = api_as(viewer)
    assert client.get(f"/api/racks/{nvl.public_id}/").json()["power"]["full_load_w"] == full_load
    ordered = client.get("/api/racks/", {"ordering": "full_load_w"}).json()["results"]
    assert [(row["name"], row["power"]["full_load_w"]) for row in ordered] == [
        ("p02", 5 * power.PLATFORM_W),
        ("nvl09", full_load),
        ("p01", _rack(rack).power.full_load_w),
    ]
    table = page.get("/").content.decode()
    table = table[table.index('id="dashboard-racks"') :]
    assert ">nvl09</a>" in table and "10.3 kW" in table


def test_a_rack_counts_its_compute_trays_at_their_figure_and_its_other_nodes_at_a_hosts(browser_as, viewer):
    nvl, _ = _rack_scale("nvl09", switch_trays=0)
    make_node(hostname="nvl09-mgmt", rack=nvl)  # a server in the rack, outside its NVLink domain
    figures = _rack(nvl)
    assert (figures.node_count, figures.hosts, figures.compute_trays) == (2, 1, 1)
    assert figures.power.full_load_w == power.PLATFORM_W + power.TRAY_PLATFORM_W
    detail = browser_as(viewer).get(reverse("rack-detail", args=[nvl.public_id])).content.decode()
    assert "0 W of GPUs at their TDP + 1 node × 2000 W + 1 compute tray × 1116 W, at full load" in detail


def test_the_estimate_runs_each_of_its_subqueries_once_per_rack(db):
    """Django writes an annotation's subquery out again wherever another annotation refers to it: the racks list's
    query once read every rack's GPUs twice."""
    sql = str(power.with_power(Rack.objects.all()).order_by("-full_load_w").query)
    assert sql.count('FROM "inventory_gpu"') == 1 and sql.count('FROM "inventory_nvlinkswitchtray"') == 1
    assert sql.count('FROM "inventory_node"') == 3  # the nodes, those powered off, their platform figures


def test_a_compute_trays_platform_figure_is_what_the_simulated_compute_tray_draws_at_full_load_besides_its_gpus(db):
    """The inventory may not import the simulator, so the figure is kept in both: they must not part, and a simulated
    tray at full load reads what the estimate counts for it (its GPUs a few watts under their TDP cap)."""
    from apps.inventory.catalogue import RACK_SYSTEMS
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.inventory.models import Node
    from apps.simulator.bmc import GRACE_BUSY_W, TRAY_BOARD_W, node_figures

    cpus = RACK_SYSTEMS["GB200 NVL72"].cpus_per_tray
    assert power.TRAY_PLATFORM_W == TRAY_BOARD_W + cpus * GRACE_BUSY_W == 1116
    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    tray = Node.objects.get(hostname="nvl01-t01")
    estimate = power.TRAY_PLATFORM_W + 4 * 1200
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    assert estimate * 0.99 <= node_figures(tray, seed=0, load=1.0, at=at).power_w <= estimate


def test_a_switch_trays_full_load_figure_is_what_the_simulated_switch_tray_draws_at_full_load():
    """The inventory may not import the simulator, so the figure is kept in both: they must not part."""
    from apps.inventory.catalogue import RACK_SYSTEMS
    from apps.simulator.bmc import NVSWITCH_BUSY_W, NVSWITCH_CHIPS, SWITCH_BOARD_W

    assert RACK_SYSTEMS["GB200 NVL72"].nvswitches_per_tray == NVSWITCH_CHIPS
    assert power.SWITCH_TRAY_W == SWITCH_BOARD_W + NVSWITCH_CHIPS * NVSWITCH_BUSY_W == 1020


def test_a_switch_tray_added_to_a_racks_domain_raises_its_estimate_in_the_same_single_query(db):
    nvl, _ = _rack_scale("nvl09", switch_trays=1)
    with CaptureQueriesContext(connection) as queries:
        before = {r.name: r.full_load_w for r in power.with_power(Rack.objects.all())}
    assert len(queries) == 1 and before == {"nvl09": power.TRAY_PLATFORM_W + power.SWITCH_TRAY_W}
    NvlinkSwitchTray.objects.create(name="nvl09-sw2", domain=nvl.nvlink_domain, slot=2)
    with CaptureQueriesContext(connection) as queries:
        after = {r.name: r.full_load_w for r in power.with_power(Rack.objects.all())}
    assert len(queries) == 1 and after == {"nvl09": power.TRAY_PLATFORM_W + 2 * power.SWITCH_TRAY_W}


def test_the_demo_nvl72_racks_estimate_counts_its_compute_and_switch_trays_within_its_budget(db):
    """72 GB200 GPUs at 1,200 W, 18 compute trays at 1,116 W and 9 switch trays at 1,020 W: 115.67 kW at the trays,
    under the rack's 132 kW budget (NVIDIA quotes about 120 kW for an NVL72 at the rack's input, which also counts
    what its power shelves lose converting it)."""
    from apps.inventory.demo import ClusterShape, load_cluster

    load_cluster(ClusterShape(compute_nodes=8, rack_scale_racks=1))
    nvl = _rack(Rack.objects.get(name="nvl01"))
    assert (nvl.gpu_tdp_w, nvl.node_count, nvl.compute_trays, nvl.switch_tray_count) == (72 * 1200, 18, 18, 9)
    assert nvl.power.full_load_w == 72 * 1200 + 18 * power.TRAY_PLATFORM_W + 9 * power.SWITCH_TRAY_W == 115_668
    assert nvl.power.budget_w == 132_000 and not nvl.power.full_load_over


def test_the_measured_draw_reads_the_same_few_queries_for_one_switch_tray_as_for_many(db):
    from apps.monitoring.panels import racks_power

    counts = []
    for name, switch_trays in (("nvl08", 1), ("nvl09", 9)):
        nvl, trays = _rack_scale(name, switch_trays=switch_trays)
        for tray in trays:
            _read_switch_tray(tray, 1000.0)
        with CaptureQueriesContext(connection) as queries:
            assert racks_power([nvl.pk])[nvl.pk].switch_trays == switch_trays
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 4


def test_the_rack_page_links_its_switches(browser_as, viewer, rack):
    switch = make_switch(name="leaf-p01", rack=rack, site=rack.site)
    detail = browser_as(viewer).get(reverse("rack-detail", args=[rack.public_id])).content.decode()
    assert f'href="{reverse("switch-detail", args=[switch.public_id])}">leaf-p01</a>' in detail


def test_a_fleet_dashboard_shows_its_most_loaded_racks_and_links_the_rest(browser_as, viewer, db):
    """Hundreds of racks are the rack list's: the dashboard shows the 12 nearest their budget, most loaded first."""
    from apps.inventory.demo import ClusterShape, load_cluster

    load_cluster(ClusterShape(compute_nodes=14 * 8))  # 14 racks of H200 and the network rack
    Rack.objects.filter(name="r09").update(power_budget_kw=10)  # over its budget
    html = browser_as(viewer).get("/").content.decode()
    table = html[html.index('id="dashboard-racks"') :]
    assert "12 of 15 racks" in html and reverse("rack-list") in html
    assert table.count("<tr>") == 1 + 12
    assert table.index(">r09<") < table.index(">r01<")  # over budget first
    assert ">net01<" not in table  # no GPUs: the least loaded
