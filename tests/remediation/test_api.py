"""/api/remediation-policies/ and /api/remediation-decisions/: viewers read and change nothing, operators define
policies (audited), bad input is refused naming the field and changes nothing; decisions are read-only and filter by
node, policy and mode; both are in the OpenAPI schema."""

import datetime as dt

import pytest

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu
from apps.remediation import services
from apps.remediation.defaults import ship_defaults
from apps.remediation.models import RemediationPolicy

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def shipped(db):
    """The policies the first migration ships (a transactional test elsewhere may have flushed them)."""
    ship_defaults(RemediationPolicy)


POLICY = {"name": "NVLink down", "kind_pattern": "nvlink_*", "min_severity": "major", "action": "quarantine"}


def test_an_operator_creates_a_policy_in_shadow_by_default_and_it_is_audited(api_as, operator):
    created = api_as(operator).post("/api/remediation-policies/", POLICY, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["mode"], body["breaker_max_nodes"], body["max_attempts"]) == ("shadow", 4, 1)
    policy = RemediationPolicy.objects.get(name="NVLink down")
    assert AuditEntry.objects.for_object(policy).filter(actor=operator).exists()

    changed = api_as(operator).patch(f"/api/remediation-policies/{body['id']}/", {"mode": "on"}, format="json")
    assert changed.status_code == 200 and changed.json()["mode"] == "on"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("breaker_max_percent", 0),
        ("breaker_max_percent", 101),
        ("breaker_max_nodes", 0),
        ("breaker_window_minutes", 0),
        ("max_attempts", 0),
        ("kind_pattern", "rm -rf /"),
        ("action", "power-off"),
        ("mode", "maybe"),
        ("min_severity", "dire"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(api_as, operator, field, value):
    before = RemediationPolicy.objects.count()
    answer = api_as(operator).post("/api/remediation-policies/", POLICY | {field: value}, format="json")
    assert answer.status_code == 400 and list(answer.json()) == [field], answer.json()
    assert RemediationPolicy.objects.count() == before


def test_a_viewer_reads_policies_but_cannot_change_them(api_as, viewer):
    client = api_as(viewer)
    listed = client.get("/api/remediation-policies/")
    assert listed.status_code == 200 and {row["kind_pattern"] for row in listed.json()["results"]} >= {"xid79"}
    shipped = RemediationPolicy.objects.get(kind_pattern="xid79")
    assert client.post("/api/remediation-policies/", POLICY, format="json").status_code == 403
    assert client.patch(f"/api/remediation-policies/{shipped.public_id}/", {"mode": "on"}).status_code == 403
    assert client.delete(f"/api/remediation-policies/{shipped.public_id}/").status_code == 403
    shipped.refresh_from_db()
    assert shipped.mode == "shadow" and not RemediationPolicy.objects.filter(name="NVLink down").exists()


def test_decisions_are_read_only_and_filter_by_node_policy_and_mode(demo_cluster, api_as, viewer, operator):
    for host in ("gpu003", "gpu004"):
        health.record_event(
            component=Gpu.objects.get(node__hostname=host, index=1), source=Source.TELEMETRY, kind="xid79",
            severity=Severity.CRITICAL, summary="GPU 1: XID 79, GPU has fallen off the bus", at=NOW,
        )  # fmt: skip
    # The shipped xid79 policy, in shadow: nothing is started; its breaker (5 % of 32 nodes) allows one node.
    assert len(services.evaluate(now=NOW)) == 2
    client = api_as(viewer)
    rows = client.get("/api/remediation-decisions/", {"node": "gpu003"}).json()["results"]
    assert [(row["node"], row["outcome"], row["mode"], row["policy_name"]) for row in rows] == [
        ("gpu003", "would_act", "shadow", "XID 79: GPU fell off the bus")
    ]
    (refused,) = client.get("/api/remediation-decisions/", {"node": "gpu004"}).json()["results"]
    assert refused["outcome"] == "refused" and refused["reason"].startswith("Circuit breaker tripped")
    policy = RemediationPolicy.objects.get(kind_pattern="xid79").public_id
    assert len(client.get("/api/remediation-decisions/", {"policy": str(policy)}).json()["results"]) == 2
    assert client.get("/api/remediation-decisions/", {"mode": "on"}).json()["results"] == []
    assert client.get("/api/remediation-decisions/", {"mode": "maybe"}).status_code == 400
    assert api_as(operator).post("/api/remediation-decisions/", {}).status_code in (403, 405)  # read-only


def test_both_are_in_the_openapi_schema(api_as, viewer):
    paths = api_as(viewer).get("/api/schema/", {"format": "json"}).json()["paths"]
    assert "/api/remediation-policies/{public_id}/" in paths and "/api/remediation-decisions/" in paths
    assert "post" not in paths["/api/remediation-decisions/"]


def test_the_page_lists_the_policies_and_the_latest_decisions(demo_cluster, browser_as, viewer):
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu010", index=0), source=Source.TELEMETRY, kind="xid79",
        severity=Severity.CRITICAL, summary="GPU 0: XID 79, GPU has fallen off the bus", at=NOW,
    )  # fmt: skip
    (decision,) = services.evaluate(now=NOW)
    page = browser_as(viewer).get("/remediation/").content.decode()
    assert 'data-policy="XID 79: GPU fell off the bus"' in page and f'data-decision="{decision.public_id}"' in page
    assert "Would drain gpu010 through the scheduler" in page
