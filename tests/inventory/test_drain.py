"""Draining a node: who may, what it changes, and that racks and tags then leave it out of new work."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.inventory.models import Node, Tag
from apps.jobs import services as jobs
from apps.jobs.choices import EventLevel

pytestmark = pytest.mark.django_db


def url(node, verb: str) -> str:
    return f"/api/nodes/{node.public_id}/{verb}/"


def test_an_operator_drains_and_undrains_over_the_api_and_both_are_audited(api_as, operator, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    until = timezone.now() + timedelta(days=2)
    response = api_as(operator).post(url(node, "drain"), {"reason": "RMA: GPU 3 XID 79", "until": until.isoformat()})

    assert response.status_code == 200, response.data
    assert response.data["drained"] is True and response.data["drain_reason"] == "RMA: GPU 3 XID 79"
    node.refresh_from_db()
    assert node.is_drained and node.drained_until == until
    entry = AuditEntry.objects.for_object(node).latest("created")
    assert entry.actor == operator and entry.changes["drain_reason"] == ["", "RMA: GPU 3 XID 79"]

    response = api_as(operator).post(url(node, "undrain"))
    assert response.status_code == 200 and response.data["drained"] is False
    node.refresh_from_db()
    assert not node.is_drained and node.drain_reason == ""
    assert AuditEntry.objects.for_object(node).latest("created").changes["drain_reason"] == ["RMA: GPU 3 XID 79", ""]


def test_anonymous_and_viewers_cannot_drain(api_client, api_as, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    assert api_client.post(url(node, "drain"), {"reason": "x"}).status_code in (401, 403)
    assert api_as(viewer).post(url(node, "drain"), {"reason": "x"}).status_code == 403
    node.refresh_from_db()
    assert not node.is_drained


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"reason": "two\nlines"}, "reason"),
        ({"reason": "fan", "since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}, "until"),
    ],
)
def test_a_bad_drain_is_a_400_naming_the_field_and_changes_nothing(api_as, operator, demo_cluster, body, field):
    node = Node.objects.get(hostname="gpu003")
    response = api_as(operator).post(url(node, "drain"), body, format="json")
    assert response.status_code == 400 and field in response.data, response.data
    node.refresh_from_db()
    assert not node.is_drained and not AuditEntry.objects.for_object(node).filter(changes__has_key="drained_at")


def test_the_drain_fields_cannot_be_patched_around_the_action(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"drain_reason": "sneaky"}, format="json")
    node.refresh_from_db()
    assert node.drain_reason == ""


def test_a_rack_or_tag_leaves_a_drained_node_out_and_says_so_but_its_host_name_takes_it(demo_cluster):
    gpu001, gpu002 = Node.objects.filter(hostname__in=["gpu001", "gpu002"]).order_by("hostname")
    Node.objects.filter(pk=gpu002.pk).update(drained_at=timezone.now(), drain_reason="fan")

    by_rack = jobs.resolve_selection(jobs.TargetSpec(racks=(gpu001.rack.name,)))
    assert "gpu002" not in [n.hostname for n in by_rack.nodes] and by_rack.drained_left_out == ["gpu002"]
    by_name = jobs.resolve_selection(jobs.TargetSpec(nodes=("gpu002",), racks=(gpu001.rack.name,)))
    assert "gpu002" in [n.hostname for n in by_name.nodes] and by_name.drained_left_out == []

    job = jobs.create_job(
        kind="sleep", targets=jobs.TargetSpec(racks=(gpu001.rack.name,)), transport="sim", queue=False
    )
    assert job.target_spec["drained_left_out"] == ["gpu002"]
    assert job.events.filter(level=EventLevel.WARNING, message__contains="drained node: gpu002").exists()


def test_a_tag_of_drained_nodes_only_is_refused_naming_them(demo_cluster):
    tag = Tag.objects.create(name="Lonely", slug="lonely")
    node = Node.objects.get(hostname="gpu005")
    node.tags.add(tag)
    Node.objects.filter(pk=node.pk).update(drained_at=timezone.now(), drain_reason="cabling")
    with pytest.raises(serializers.ValidationError) as raised:
        jobs.resolve_targets(jobs.TargetSpec(tags=("lonely",)))
    assert "drained (gpu005)" in str(raised.value.detail["targets"])
