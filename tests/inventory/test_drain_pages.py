"""Draining from the node page and the node list, and how a drained node shows where it appears."""

import pytest

from apps.core.models import AuditEntry
from apps.inventory.choices import NodeStatus
from apps.inventory.models import Node

pytestmark = pytest.mark.django_db


def test_an_operator_drains_from_the_node_page_and_it_shows_on_the_list_and_the_rack(
    browser_as, operator, demo_cluster
):
    node = Node.objects.get(hostname="gpu004")
    client = browser_as(operator)
    assert f"/nodes/{node.public_id}/drain/" in client.get(f"/nodes/{node.public_id}/").content.decode()
    response = client.post(f"/nodes/{node.public_id}/drain/", {"reason": "PSU swap"}, follow=True)

    assert "Drained since" in response.content.decode() and "PSU swap" in response.content.decode()
    node.refresh_from_db()
    assert node.is_drained and AuditEntry.objects.for_object(node).filter(actor=operator).exists()
    listing = client.get("/nodes/", {"q": "gpu004"}).content.decode()
    assert 'title="PSU swap">Drained</span>' in listing
    assert "drained: PSU swap" in client.get("/racks/elevations/").content.decode()

    client.post(f"/nodes/{node.public_id}/undrain/")
    node.refresh_from_db()
    assert not node.is_drained


def test_a_viewer_cannot_drain_and_sees_no_drain_form(browser_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu004")
    client = browser_as(viewer)
    assert client.post(f"/nodes/{node.public_id}/drain/", {"reason": "x"}).status_code == 403
    assert client.post("/nodes/bulk/", {"action": "drain", "nodes": [node.public_id], "reason": "x"}).status_code == 403
    assert f"/nodes/{node.public_id}/drain/" not in client.get(f"/nodes/{node.public_id}/").content.decode()
    node.refresh_from_db()
    assert not node.is_drained


def test_the_list_drains_a_selection_and_an_operator_may_not_bulk_edit(browser_as, operator, demo_cluster):
    picked = list(Node.objects.filter(hostname__in=["gpu001", "gpu002"]))
    client = browser_as(operator)
    client.post("/nodes/bulk/", {"action": "drain", "nodes": [n.public_id for n in picked], "reason": "fabric work"})
    assert set(Node.objects.drained().values_list("hostname", flat=True)) == {"gpu001", "gpu002"}

    client.post("/nodes/bulk/", {"action": "edit", "nodes": [picked[0].public_id], "status": "degraded"})
    assert Node.objects.get(hostname="gpu001").status == NodeStatus.READY


def test_an_admin_bulk_edits_status_and_a_refused_jump_changes_nothing(browser_as, admin, demo_cluster):
    picked = list(Node.objects.filter(hostname__in=["gpu001", "gpu002"]))
    client = browser_as(admin)
    client.post("/nodes/bulk/", {"action": "edit", "nodes": [n.public_id for n in picked], "status": "degraded"})
    assert set(Node.objects.filter(pk__in=[n.pk for n in picked]).values_list("status", flat=True)) == {"degraded"}
    assert AuditEntry.objects.for_object(picked[0]).filter(actor=admin, changes__has_key="status").exists()

    response = client.post(
        "/nodes/bulk/", {"action": "edit", "nodes": [n.public_id for n in picked], "status": "planned"}, follow=True
    )
    assert "Nothing changed" in response.content.decode() and "cannot become planned" in response.content.decode()
    assert set(Node.objects.filter(pk__in=[n.pk for n in picked]).values_list("status", flat=True)) == {"degraded"}


def test_drain_times_are_typed_in_utc_and_a_bad_one_is_named_by_its_label(browser_as, operator, demo_cluster):
    node = Node.objects.get(hostname="gpu004")
    client = browser_as(operator)
    page = client.get(f"/nodes/{node.public_id}/").content.decode()
    assert "Until (UTC)" in page and 'placeholder="YYYY-MM-DD HH:MM"' in page

    refused = client.post(f"/nodes/{node.public_id}/drain/", {"reason": "PSU", "until": "tomorrow"}, follow=True)
    assert "was not drained: Until (UTC): Write a UTC time as YYYY-MM-DD HH:MM" in refused.content.decode()
    node.refresh_from_db()
    assert not node.is_drained

    bulk = {"action": "drain", "nodes": [node.public_id], "reason": "PSU", "until": "31/12/2027"}
    refused = client.post("/nodes/bulk/", bulk, follow=True).content.decode()
    assert "Nothing changed: Until (UTC): Write a UTC time" in refused

    client.post(f"/nodes/{node.public_id}/drain/", {"reason": "PSU", "until": "2027-03-31 14:30"})
    node.refresh_from_db()
    assert node.drained_until.isoformat() == "2027-03-31T14:30:00+00:00"
