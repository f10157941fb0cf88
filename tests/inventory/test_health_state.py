"""The inventory's pages and API show the health the open events give (apps/health writes it on the GPU and the
node): the dashboard's GPU tally agrees with "What is wrong now", the node list and API show and filter a node's
health state."""

import json

import pytest

from apps.health import services
from apps.health.choices import ClearedBy, Severity, Source
from apps.inventory.models import Gpu, Node
from apps.inventory.transfer import import_inventory
from apps.inventory.transfer.sections import DOCUMENT_VERSION
from tests.factories import h200, make_node

pytestmark = pytest.mark.django_db


def xid79(hostname: str, index: int):
    return services.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=index),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary=f"GPU {index}: XID 79, fell off the bus",
    )


def gpu_tally(page) -> dict[str, int]:
    return {t.value: t.count for t in page.context["gpus_by_health"]}


def test_the_dashboard_tally_follows_an_xid_and_its_clearing(browser_as, viewer, demo_cluster):
    client = browser_as(viewer)
    event = xid79("gpu005", 3)

    page = client.get("/")
    assert (gpu_tally(page)["failed"], gpu_tally(page)["healthy"]) == (1, 255)
    assert b"gpu005</a> GPU3" in page.content  # the unhealthy GPUs list names it too
    assert "xid79" in page.content.decode()  # and "What is wrong now" says the same

    services.clear_event(event=event, by=ClearedBy.OPERATOR, reason="GPU reseated, burn-in passed")
    page = client.get("/")
    assert (gpu_tally(page)["failed"], gpu_tally(page)["healthy"]) == (0, 256)


def test_the_node_list_shows_and_filters_the_health_state(browser_as, viewer, demo_cluster):
    xid79("gpu005", 3)
    client = browser_as(viewer)

    unhealthy = client.get("/nodes/", {"health_state": "unhealthy"})
    assert [node.hostname for node in unhealthy.context["object_list"]] == ["gpu005"]
    assert b'<span class="badge red">Unhealthy</span>' in unhealthy.content
    assert client.get("/nodes/", {"health_state": "healthy"}).context["paginator"].count == Node.objects.count() - 1
    page = client.get(f"/nodes/{Node.objects.get(hostname='gpu005').public_id}/")
    assert b'title="What its open health events say">Unhealthy</span>' in page.content  # the node page's header
    refused = client.get("/nodes/", {"health_state": "sick"})
    assert "health_state" in refused.context["filter"].errors and refused.context["paginator"].count == 0


def test_the_nodes_api_has_the_health_state_read_only_and_filters_on_it(api_as, viewer, admin, demo_cluster):
    xid79("gpu005", 3)
    client = api_as(viewer)

    found = client.get("/api/nodes/", {"health_state": "unhealthy"}).data
    assert [(node["hostname"], node["health_state"]) for node in found["results"]] == [("gpu005", "unhealthy")]
    assert client.get("/api/nodes/", {"health_state": "sick"}).status_code == 400

    node = Node.objects.get(hostname="gpu005")
    changed = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"health_state": "healthy"}, format="json")
    assert changed.status_code == 200 and changed.data["health_state"] == "unhealthy"  # derived: not edited


def test_a_gpu_added_through_the_api_says_presence_and_its_health_follows(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu005")
    payload = {"node": str(node.public_id), "index": 9, "sku": "H200 SXM", "presence": "present", "health": "failed"}
    created = api_as(admin).post("/api/gpus/", payload, format="json")
    assert created.status_code == 201, created.data
    assert (created.data["presence"], created.data["health"]) == ("present", "healthy")


def test_an_import_says_presence_and_an_older_export_with_health_still_imports(admin):
    node = make_node()
    h200()  # the shipped SKU the rows name
    gpus = [
        {"node": node.hostname, "index": 0, "sku": "H200 SXM", "presence": "present"},
        {"node": node.hostname, "index": 1, "sku": "H200 SXM", "health": "missing"},  # exported before presence
        {"node": node.hostname, "index": 2, "sku": "H200 SXM", "health": "failed"},
        {"node": node.hostname, "index": 3, "sku": "H200 SXM"},
    ]
    import_inventory(text=json.dumps({"version": DOCUMENT_VERSION, "gpus": gpus}), fmt="json", user=admin)

    assert list(node.gpus.order_by("index").values_list("presence", "health")) == [
        ("present", "healthy"),
        ("missing", "missing"),
        ("present", "healthy"),  # a failure is a health event's to say: none is open
        ("unknown", "unknown"),
    ]
