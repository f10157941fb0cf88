"""Fleet health: a GPU an open difference says is missing is not healthy, however the inventory rates it; the
number falls with it; schedulers poll GET /api/health/."""

import pytest

from apps.discovery.models import Difference
from apps.health.choices import NodeState, Severity, Source
from apps.health.services import record_event
from apps.inventory.choices import NodeStatus, PowerState
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Node, NvlinkSwitchTray
from apps.jobs.models import Job
from apps.monitoring import health
from apps.monitoring.demo import load_slos
from apps.workloads.demo import load_workloads

from .conftest import free_port

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


def test_nodes_still_being_brought_up_are_counted_apart_not_as_unhealthy(fleet, api_as, viewer, browser_as):
    # A rack racked for a deployment is no fault of the fleet's: the demo's r04 made "24 of 32 compute nodes" healthy
    # beside "Nothing open".
    Node.objects.filter(hostname__in=["gpu003", "gpu004"]).update(status=NodeStatus.RACKED)
    all_ready = health.fleet_health(with_slos=False)
    Node.objects.filter(hostname="gpu001").update(status=NodeStatus.FAILED)

    report = health.fleet_health(with_slos=False)

    parts = {part["part"]: part for part in all_ready["breakdown"]}
    assert all_ready["score"] == 100
    assert parts["nodes_healthy"]["counted"] == "2 of 2 compute nodes in production"
    assert parts["gpus_healthy"]["counted"] == "16 of 16 GPUs"
    assert all_ready["not_in_production"] == {"racked": 2}
    assert {part["part"]: part for part in report["breakdown"]}["nodes_healthy"]["share"] == 0.5
    body = api_as(viewer).get("/api/health/").json()
    assert body["not_in_production"] == {"racked": 2}
    assert {node["node"]: node["healthy"] for node in body["nodes"]} == {
        "gpu001": False,
        "gpu002": True,
        "gpu003": False,  # not schedulable, whatever the number says
        "gpu004": False,
    }
    page = browser_as(viewer).get("/").content.decode()
    assert "Not counted: compute nodes not in production (2 racked)" in page
    assert "gpu001 — status is failed" in page and "gpu003 —" not in page


def test_the_dashboard_shows_the_number(fleet, browser_as, viewer):
    page = browser_as(viewer).get("/").content.decode()

    assert 'id="fleet-health-score"' in page


def test_a_node_whose_gpu_indexes_have_a_gap_is_read_by_index_not_position(fleet, api_as, viewer):
    from apps.inventory.models import Gpu

    Gpu.objects.filter(node=fleet["gpu001"], index=0).delete()  # GPUs 1-7 remain: positions no longer match indexes

    answer = api_as(viewer).get("/api/health/")

    assert answer.status_code == 200


def test_with_prometheus_down_the_api_answers_from_the_inventory(fleet, api_as, viewer, settings):
    settings.RACKPILOT_PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.RACKPILOT_PROMETHEUS_TIMEOUT_SECONDS = 1
    load_workloads()
    assert load_slos()  # the service's SLOs (the training job needs more nodes than four)
    _missing_gpu(fleet["gpu004"])

    body = api_as(viewer).get("/api/health/").json()

    nodes = {node["node"]: node for node in body["nodes"]}
    assert not nodes["gpu004"]["healthy"] and nodes["gpu001"]["healthy"]
    slos = next(part for part in body["breakdown"] if part["part"] == "slos_met")
    assert slos["counted"] == "0 of 0 SLOs met (1 h)"  # none judged: the telemetry could not be read


def test_a_node_its_bmc_reads_off_is_not_healthy(fleet):
    Node.objects.filter(hostname="gpu002").update(power_state=PowerState.OFF)

    nodes = {node.hostname: node for node in health.node_health(with_telemetry=False)}

    assert not nodes["gpu002"].healthy and nodes["gpu002"].reasons == ["powered off (its BMC reads it off)"]
    assert nodes["gpu001"].healthy


def test_a_switch_tray_down_degrades_the_trays_of_its_domain_only(db):
    load_cluster(ClusterShape(compute_nodes=4, nodes_per_rack=4, management_nodes=0, rack_scale_racks=1))
    Node.objects.update(status=NodeStatus.READY)
    tray = NvlinkSwitchTray.objects.get(domain__name="nvl01", slot=6)
    record_event(
        component=tray,
        source=Source.TELEMETRY,
        kind="nvlink_switch_tray_down",
        severity=Severity.MAJOR,
        summary="nvl01-sw6 (switch tray 6 of nvl01) down: every GPU of the domain lost its 2 links to it",
    )

    nodes = {node.hostname: node for node in health.node_health(with_telemetry=False)}

    trays = [node for name, node in nodes.items() if name.startswith("nvl01-t")]
    assert len(trays) == 18
    assert all(node.healthy and node.state == NodeState.DEGRADED for node in trays)  # fewer links, still in service
    down = "nvl01-sw6 (switch tray 6 of nvl01) down: every GPU of the domain lost its 2 links to it"
    assert trays[0].reasons == [f"{down} (major, telemetry watch)"]
    assert nodes["gpu001"].state == NodeState.HEALTHY and nodes["gpu001"].reasons == []
