"""Fleet health: a GPU an open difference says is missing is not healthy, however the inventory rates it; the
number falls with it; schedulers poll GET /api/health/."""

import pytest

from apps.discovery.models import Difference
from apps.inventory.choices import NodeStatus
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node
from apps.jobs.models import Job
from apps.monitoring import health

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0))
    Node.objects.update(status=NodeStatus.READY)
    return {node.hostname: node for node in Node.objects.all()}


def _missing_gpu(node):
    job = Job.objects.create(kind="discover", transport="sim")
    Difference.objects.create(
        job=job,
        node=node,
        object_type="gpu",
        object_key="GPU3",
        field="present",
        expected="present",
        discovered="missing",
    )


def test_a_gpu_a_discovery_found_missing_makes_its_node_unhealthy_and_lowers_the_number(fleet):
    before = health.fleet_health()
    _missing_gpu(fleet["gpu002"])
    after = health.fleet_health()

    nodes = {node.hostname: node for node in after["nodes"]}
    assert not nodes["gpu002"].healthy and "GPU3 missing (found by discovery)" in nodes["gpu002"].reasons
    assert nodes["gpu001"].healthy
    assert after["score"] < before["score"] <= 100
    assert {part["part"] for part in after["breakdown"]} == set(health.WEIGHTS)


def test_a_node_not_ready_is_not_healthy(fleet):
    fleet["gpu003"].status = NodeStatus.DEGRADED
    fleet["gpu003"].save()

    nodes = {node.hostname: node for node in health.node_health(with_telemetry=False)}

    assert nodes["gpu003"].reasons == ["status is degraded"]


def test_schedulers_poll_the_api_and_anonymous_callers_are_refused(fleet, api_as, viewer, client):
    _missing_gpu(fleet["gpu004"])

    answer = api_as(viewer).get("/api/health/")

    assert answer.status_code == 200
    body = answer.json()
    assert 0 <= body["score"] <= 100
    entry = next(node for node in body["nodes"] if node["node"] == "gpu004")
    assert entry == {
        "node": "gpu004",
        "healthy": False,
        "state": "unhealthy",
        "reasons": ["GPU3 missing (found by discovery)"],
        "events": [],
    }
    assert client.get("/api/health/").status_code in (401, 403)


def test_the_dashboard_shows_the_number(fleet, browser_as, viewer):
    page = browser_as(viewer).get("/").content.decode()

    assert 'id="fleet-health-score"' in page


def test_a_node_whose_gpu_indexes_have_a_gap_is_read_by_index_not_position(fleet, api_as, viewer):
    from apps.inventory.models import Gpu

    Gpu.objects.filter(node=fleet["gpu001"], index=0).delete()  # GPUs 1-7 remain: positions no longer match indexes

    answer = api_as(viewer).get("/api/health/")

    assert answer.status_code == 200
