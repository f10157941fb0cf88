"""Every view reads the one state: /api/health/ answers per node with its open events as reasons, the fleet-health
number counts every unresolved incident, and /api/health-events/ lists, filters and (operators) clears events."""

from datetime import UTC, datetime, timedelta

import pytest

from apps.core.models import AuditEntry
from apps.diagnosis.choices import IncidentState
from apps.diagnosis.models import Incident
from apps.health import services
from apps.health.choices import Severity, Source
from apps.inventory.choices import NodeStatus
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Node
from apps.monitoring import health

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def fleet(db):
    load_cluster(ClusterShape(compute_nodes=3, nodes_per_rack=3, management_nodes=0))
    Node.objects.update(status=NodeStatus.READY)
    return {node.hostname: node for node in Node.objects.all()}


def xid79(node, *, at=T0):
    gpu = Gpu.objects.get(node=node, index=5)
    return services.record_event(
        component=gpu, source=Source.TELEMETRY, kind="xid79", severity=Severity.CRITICAL,
        summary="GPU 5: XID 79, fell off the bus", evidence={"xid": 79, "lines": ["NVRM: Xid (PCI:0000:9a:00): 79"]},
        at=at,
    )  # fmt: skip


def slow_port(node, *, at=T0):
    return services.record_event(
        component=node.nics.order_by("name").first(), source=Source.SWEEP, kind="link_errors",
        severity=Severity.MINOR, summary="CRC errors growing", at=at,
    )  # fmt: skip


def test_the_health_api_answers_each_node_with_its_open_events_as_reasons(fleet, api_as, viewer):
    event = xid79(fleet["gpu002"])
    slow_port(fleet["gpu003"])

    body = api_as(viewer).get("/api/health/").json()
    nodes = {entry["node"]: entry for entry in body["nodes"]}

    assert nodes["gpu002"]["healthy"] is False and nodes["gpu002"]["state"] == "unhealthy"
    assert "GPU 5: XID 79, fell off the bus (critical, telemetry watch)" in nodes["gpu002"]["reasons"]
    assert [item["id"] for item in nodes["gpu002"]["events"]] == [str(event.public_id)]
    assert nodes["gpu002"]["events"][0]["component"] == "gpu002 GPU5"
    # A minor finding degrades the node and names itself, but leaves it schedulable.
    assert (nodes["gpu003"]["healthy"], nodes["gpu003"]["state"]) == (True, "degraded")
    assert nodes["gpu003"]["reasons"] == ["CRC errors growing (minor, sweep)"]
    assert (nodes["gpu001"]["healthy"], nodes["gpu001"]["state"], nodes["gpu001"]["events"]) == (True, "healthy", [])


def test_a_cleared_event_is_no_longer_a_reason(fleet, api_as, viewer):
    event = xid79(fleet["gpu002"])
    services.clear_event(event=event, by="operator", reason="GPU replaced", at=T0)

    nodes = {entry["node"]: entry for entry in api_as(viewer).get("/api/health/").json()["nodes"]}

    assert nodes["gpu002"]["healthy"] is True and nodes["gpu002"]["events"] == []


def test_unresolved_incidents_count_on_the_fleet_health_number(fleet):
    # Two incidents a runbook could not resolve used to count as "0 open incident(s)": only active states counted.
    Incident.objects.create(title="NCCL timeout", node=fleet["gpu001"], state=IncidentState.UNRESOLVED)
    Incident.objects.create(title="training interrupted", node=fleet["gpu002"], state=IncidentState.UNRESOLVED)
    Incident.objects.create(title="fixed", node=fleet["gpu003"], state=IncidentState.RESOLVED)

    report = health.fleet_health(with_slos=False)
    part = next(part for part in report["breakdown"] if part["part"] == "no_open_incidents")
    nodes = {node.hostname: node for node in report["nodes"]}

    assert part["counted"] == "2 unresolved incidents" and part["share"] < 1
    assert nodes["gpu001"].reasons == ["unresolved incident: NCCL timeout"] and not nodes["gpu001"].healthy
    assert nodes["gpu003"].healthy


def test_events_are_listed_worst_first_and_filtered(fleet, api_as, viewer):
    minor = slow_port(fleet["gpu003"], at=T0 + timedelta(minutes=5))
    critical = xid79(fleet["gpu002"])
    cleared = xid79(fleet["gpu001"], at=T0 - timedelta(hours=1))
    services.clear_event(event=cleared, by="operator", reason="reseated", at=T0)
    client = api_as(viewer)

    every = client.get("/api/health-events/").json()
    assert [item["id"] for item in every["results"]] == [
        str(critical.public_id), str(cleared.public_id), str(minor.public_id)
    ]  # fmt: skip
    only_open = client.get("/api/health-events/?open=true").json()["results"]
    assert [item["id"] for item in only_open] == [str(critical.public_id), str(minor.public_id)]
    by_node = client.get("/api/health-events/?node=gpu003&severity=minor&source=sweep").json()["results"]
    assert [item["id"] for item in by_node] == [str(minor.public_id)]
    assert client.get("/api/health-events/?severity=dire").status_code == 400
    assert client.get("/api/health-events/?node=gpu999").status_code == 400

    detail = client.get(f"/api/health-events/{critical.public_id}/").json()
    assert detail["gpu"] == 5 and detail["node"] == "gpu002" and detail["open"] is True
    assert detail["evidence"][0]["lines"] == ["NVRM: Xid (PCI:0000:9a:00): 79"]


def test_operators_clear_with_a_reason_viewers_may_not_and_anonymous_callers_are_refused(
    fleet, api_as, viewer, operator, api_client
):
    event = xid79(fleet["gpu002"])
    url = f"/api/health-events/{event.public_id}/clear/"

    assert api_client.get("/api/health-events/").status_code in (401, 403)
    assert api_as(viewer).post(url, {"reason": "fine"}, format="json").status_code == 403
    missing = api_as(operator).post(url, {}, format="json")
    assert missing.status_code == 400 and "reason" in missing.json()
    event.refresh_from_db()
    assert event.is_open

    done = api_as(operator).post(url, {"reason": "GPU reseated, dcgmi diag passed"}, format="json")

    assert done.status_code == 200
    body = done.json()
    assert (body["open"], body["cleared_by"], body["cleared_by_user"]) == (False, "operator", "operator")
    assert body["clear_reason"] == "GPU reseated, dcgmi diag passed"
    entry = AuditEntry.objects.for_object(event).filter(action="clear").get()
    assert (entry.source, entry.actor_name) == ("api", "operator")
    again = api_as(operator).post(url, {"reason": "again"}, format="json")
    assert again.status_code == 400 and "event" in again.json()


def test_a_gpu_with_an_open_event_counts_once_among_the_unhealthy_gpus(fleet):
    total = Gpu.objects.count()
    xid79(fleet["gpu002"])
    Gpu.objects.filter(node=fleet["gpu002"], index=5).update(health="unhealthy")  # the inventory says so too
    slow_port(fleet["gpu003"])  # a NIC's minor event is no GPU's

    report = health.fleet_health(with_slos=False)

    part = next(part for part in report["breakdown"] if part["part"] == "gpus_healthy")
    assert part["counted"] == f"{total - 1} of {total} GPUs"
