"""Switches and PDUs in rack units (apps/inventory/models/mounting.py): fit and overlap checked like nodes', on the face
they are mounted (nodes fill both); the elevation draws front and rear with every device linked; PDUs over the API
and in the inventory document; the racks list sorted by the measured draw in the database."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.inventory.models import Pdu, Rack, Switch
from apps.inventory.transfer import ImportRejected, export_inventory, import_inventory
from apps.monitoring.models import BmcReading
from tests.factories import make_node, make_pdu, make_rack, make_switch

pytestmark = pytest.mark.django_db


@pytest.fixture
def rack():
    """A 10U rack: a 4U node at U1–U4, a leaf at U10 on the front."""
    rack = make_rack(name="m01", u_height=10)
    make_node(hostname="m-node", rack=rack, u_position=1, u_height=4)
    make_switch(name="m-leaf", rack=rack, site=rack.site, position=10, face="front")
    return rack


def _errors(obj) -> dict:
    with pytest.raises(ValidationError) as caught:
        obj.full_clean()
    return caught.value.message_dict


# --- validation -----------------------------------------------------------------------------------------------------


def test_a_switch_overlapping_a_node_is_refused_on_either_face(rack):
    for face in ("front", "rear"):
        switch = Switch(name="x", site=rack.site, rack=rack, plane="A", tier="leaf", port_count=8, port_speed_gbps=100)
        switch.position, switch.face = 4, face
        assert _errors(switch)["position"] == ["U4 overlaps m-node at U1."]


def test_switches_share_units_only_on_opposite_faces(rack):
    behind = Switch(name="behind", site=rack.site, rack=rack, plane="A", tier="leaf", port_count=8, port_speed_gbps=1)
    behind.position, behind.face = 10, "rear"
    behind.full_clean()  # the rear of U10 is free
    behind.face = "front"
    assert _errors(behind)["position"] == ["U10 overlaps m-leaf at U10 (front)."]


def test_a_device_out_of_the_rack_or_placed_without_one_is_refused(rack):
    switch = Switch.objects.get(name="m-leaf")
    switch.u_height = 2  # U10–U11 in a 10U rack
    assert _errors(switch)["position"] == ["U10–U11 does not fit in m01 (10U)."]
    loose = Switch(name="loose", site=rack.site, plane="A", tier="leaf", port_count=8, port_speed_gbps=1, position=3)
    assert _errors(loose)["position"] == ["A rack position needs a rack."]
    pdu = Pdu(name="p", rack=rack, feed="A", max_power_w=1000, outlet_count=8, position=9, u_height=2, face="front")
    assert _errors(pdu)["position"] == ["U9–U10 overlaps m-leaf at U10 (front)."]


def test_a_node_is_refused_where_a_switch_or_a_pdu_sits(rack):
    make_pdu(name="m-pdu", rack=rack, position=6, face="rear", side="")
    node = make_node(hostname="m-two", rack=rack)
    node.u_position, node.u_height = 5, 2
    assert _errors(node)["u_position"] == ["U5–U6 overlaps m-pdu at U6 (rear)."]
    node.u_position = 9
    assert _errors(node)["u_position"] == ["U9–U10 overlaps m-leaf at U10 (front)."]


def test_a_pdu_is_vertical_on_a_side_or_in_units_and_has_a_rating(rack):
    pdu = Pdu(name="p", rack=rack, feed="B", outlet_count=24, max_power_w=None)
    errors = _errors(pdu)
    assert "side" in errors and "max_power_w" in errors
    pdu.side, pdu.rated_amps, pdu.rated_volts = "right", Decimal("32"), 230
    pdu.full_clean()
    assert pdu.capacity_w == 7360 and pdu.mounting == "0U, rear right"
    pdu.position = 5
    assert _errors(pdu)["side"] == ["A PDU in U slots has no side; leave it empty or clear the position."]


# --- pages ------------------------------------------------------------------------------------------------------------


def _face(html: str, face: str) -> str:
    """The face's part of the page: the front ends where the left 0U strip starts, the rear where the right one does."""
    start = html.index(f'data-face="{face}"')
    return html[start : html.index('data-side="left"' if face == "front" else 'data-side="right"', start)]


def test_the_rack_page_links_each_device_on_its_face(browser_as, viewer, rack):
    rear_switch = make_switch(name="m-mgmt", rack=rack, site=rack.site, position=9, face="rear")
    strip = make_pdu(name="m-pdu-a", rack=rack)
    mounted = make_pdu(name="m-pdu-b", rack=rack, feed="B", position=5, face="front")
    node, leaf = rack.nodes.get(), Switch.objects.get(name="m-leaf")
    html = browser_as(viewer).get(reverse("rack-detail", args=[rack.public_id])).content.decode()

    def link(name, obj):
        return f'href="{reverse(name, args=[obj.public_id])}"'

    front, rear = _face(html, "front"), _face(html, "rear")
    assert link("node-detail", node) in front and link("node-detail", node) in rear  # full depth
    assert link("switch-detail", leaf) in front and link("switch-detail", leaf) not in rear
    assert link("switch-detail", rear_switch) in rear and link("switch-detail", rear_switch) not in front
    assert link("pdu-detail", mounted) in front and link("pdu-detail", mounted) not in rear
    zero_u = html[html.index('data-side="left"') : html.index('data-face="rear"')]
    assert link("pdu-detail", strip) in zero_u
    # Empty units are numbered: U6–U9 free on the front, U5–U8 and U10 on the rear.
    assert [u for u in range(1, 11) if f'<span class="n">{u}</span></div>' in front] == [6, 7, 8, 9]
    assert [u for u in range(1, 11) if f'<span class="n">{u}</span></div>' in rear] == [5, 6, 7, 8, 10]
    detail = browser_as(viewer).get(reverse("pdu-detail", args=[strip.public_id])).content.decode()
    assert link("rack-detail", rack) in detail and "0U, rear left" in detail and "22000 W" in detail


def test_rack_pages_cost_the_same_queries_with_more_devices(browser_as, viewer, rack):
    page = browser_as(viewer)
    make_rack(name="m02", site=rack.site)
    page.get(reverse("rack-list"))  # session and first-use queries out of the count

    def counted(url):
        with CaptureQueriesContext(connection) as queries:
            assert page.get(url).status_code == 200
        return len(queries)

    detail, listed = counted(reverse("rack-detail", args=[rack.public_id])), counted(reverse("rack-list"))
    drawn = counted(reverse("rack-elevations"))
    other = Rack.objects.get(name="m02")
    make_switch(name="m-rear", rack=rack, site=rack.site, position=8, face="rear")
    make_pdu(rack=rack)
    make_pdu(rack=other, side="right")
    make_switch(rack=other, site=rack.site, position=1)
    assert counted(reverse("rack-detail", args=[rack.public_id])) == detail
    assert counted(reverse("rack-list")) == listed
    assert counted(reverse("rack-elevations")) == drawn


def test_the_pdu_list_filters_and_refuses_an_unknown_rack(browser_as, viewer, rack):
    make_pdu(name="m-pdu-a", rack=rack)
    make_pdu(name="other-pdu")
    page = browser_as(viewer)
    shown = page.get(reverse("pdu-list"), {"rack": "m01"})
    assert [p.name for p in shown.context["object_list"]] == ["m-pdu-a"]
    refused = page.get(reverse("pdu-list"), {"rack": "nowhere"})
    assert "No rack matches" in refused.content.decode() and not refused.context["object_list"]


# --- API, document, audit -------------------------------------------------------------------------------------------


def test_api_creates_a_pdu_naming_its_rack_and_refuses_an_overlap(api_as, admin, viewer, rack):
    client = api_as(admin)
    made = client.post(
        "/api/pdus/",
        {"name": "m-pdu-b", "rack": "m01", "feed": "B", "rated_amps": "16.0", "rated_volts": 230, "outlet_count": 12,
         "side": "right"},
        format="json",
    )  # fmt: skip
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["rack"]["display"] == "m01" and body["capacity_w"] == 3680 and body["position"] is None
    clash = client.post(
        "/api/pdus/",
        {"name": "m-pdu-c", "rack": "m01", "feed": "A", "max_power_w": 5000, "outlet_count": 8, "position": 2,
         "face": "rear"},
        format="json",
    )  # fmt: skip
    assert clash.status_code == 400 and "overlaps m-node" in clash.json()["position"][0]
    assert not Pdu.objects.filter(name="m-pdu-c").exists()
    listed = api_as(viewer).get("/api/pdus/", {"rack": "m01", "feed": "B", "ordering": "-name"}).json()
    assert [row["name"] for row in listed["results"]] == ["m-pdu-b"]
    assert api_as(viewer).post("/api/pdus/", {}, format="json").status_code == 403
    moved = client.patch(f"/api/switches/{Switch.objects.get(name='m-leaf').public_id}/", {"position": 3})
    assert moved.status_code == 400 and moved.json()["position"] == ["U3 overlaps m-node at U1."]


def test_pdus_and_switch_units_go_through_the_document_and_a_bad_row_names_its_field(rack, admin):
    make_pdu(name="m-pdu-a", rack=rack, max_power_w=None, rated_amps=Decimal("32.0"), rated_volts=230)
    make_pdu(name="m-pdu-b", rack=rack, feed="B", position=6, u_height=2, face="front")
    document = export_inventory(fmt="json")
    row = next(row for row in json.loads(document)["pdus"] if row["name"] == "m-pdu-a")
    assert row["rack"] == {"site": rack.site.slug, "name": "m01"} and row["side"] == "left"
    assert row["max_power_w"] is None and row["rated_volts"] == 230
    Pdu.objects.all().delete()
    Switch.objects.filter(name="m-leaf").update(position=None)
    result = import_inventory(text=document, fmt="json", user=admin)
    assert result.sections["pdus"].created == 2 and result.sections["switches"].updated == 1
    assert export_inventory(fmt="json") == document
    assert Switch.objects.get(name="m-leaf").position == 10
    assert Pdu.objects.get(name="m-pdu-a").capacity_w == 7360

    bad = document.replace('"position": 6', '"position": 1')
    with pytest.raises(ImportRejected) as caught:
        import_inventory(text=bad, fmt="json", user=admin)
    [problem] = caught.value.problems
    assert (problem.section, problem.field) == ("pdus", "position") and "overlaps m-node" in problem.message
    assert Pdu.objects.get(name="m-pdu-b").position == 6


def test_a_pdu_change_is_a_readable_diff_in_the_audit_log(browser_as, admin, rack):
    pdu = make_pdu(name="m-pdu-a", rack=rack)
    pdu.outlet_count = 48
    pdu.save()
    entry = AuditEntry.objects.filter(object_repr="m-pdu-a").order_by("-created").first()
    assert entry.changes == {"outlet_count": [24, 48]}
    html = browser_as(admin).get(reverse("audit-log"), {"object_type": entry.object_type}).content.decode()
    assert "<strong>m-pdu-a</strong>" in html and "<strong>outlet count</strong>: 24 → 48" in html
    assert "<strong>feed</strong>: Feed A" in html and "<strong>rack</strong>: m01" in html  # the creation, in words


# --- the racks list sorted by measured draw ---------------------------------------------------------------------------


def _read(node, watts: float, *, age=timedelta(minutes=1), sensor="DCMI Power", at=None):
    time = at or timezone.now() - age
    BmcReading.objects.create(node=node, time=time, kind="power", sensor=sensor, unit="W", value=watts)


def test_the_racks_list_sorts_by_the_measured_draw_in_the_database(browser_as, viewer, db):
    low, high, silent = make_rack(name="s-low"), make_rack(name="s-high"), make_rack(name="s-silent")
    _read(make_node(hostname="s1", rack=low), 3000.0)
    busy = make_node(hostname="s2", rack=high)
    _read(busy, 9000.0, age=timedelta(minutes=4))
    poll = timezone.now() - timedelta(minutes=1)
    _read(busy, 500.0, sensor="PSU1 Input", at=poll)  # the latest poll has only supplies: their sum counts
    _read(busy, 600.0, sensor="PSU2 Input", at=poll)
    _read(make_node(hostname="s3", rack=high), 2000.0)
    _read(make_node(hostname="s4", rack=silent), 99000.0, age=timedelta(hours=1))  # too old: no figure
    page = browser_as(viewer)
    for sort, expected in (("-measured_kw", ["s-high", "s-low", "s-silent"]),
                           ("measured_kw", ["s-low", "s-high", "s-silent"])):  # fmt: skip
        shown = page.get(reverse("rack-list"), {"sort": sort})
        assert shown.status_code == 200
        racks = list(shown.context["object_list"])
        assert [r.name for r in racks] == expected  # no readings last, either way
        assert {r.name: r.power.measured_w for r in racks} == {"s-high": 3100.0, "s-low": 3000.0, "s-silent": None}
    refused = page.get(reverse("rack-list"), {"sort": "nonsense"})
    assert refused.status_code == 400 and "measured_kw" in refused.content.decode()
