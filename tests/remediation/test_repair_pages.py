"""The repairs' pages and /api/repairs/: viewers read and change nothing (403), operators act (audited), a refusal is
a 400 naming the field and changes nothing; the node page's History section tells the loop in time order; a node in
repair is not undrained by hand through the node page or the API."""

import datetime as dt

import pytest
from django.urls import reverse
from rest_framework import serializers

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu, Node
from apps.inventory.services import drain_nodes
from apps.jobs.models import Job
from apps.remediation import repairs
from apps.remediation.choices import RepairState
from apps.remediation.models import PartReplacement, Repair, RepairGate

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def repair(demo_cluster):
    node = Node.objects.get(hostname="gpu006")
    event = health.record_event(
        component=Gpu.objects.get(node=node, index=2), source=Source.TELEMETRY, kind="xid79",
        severity=Severity.CRITICAL, summary="GPU 2: XID 79, GPU has fallen off the bus", at=NOW,
    )  # fmt: skip
    drain_nodes(nodes=[node], reason="rackpilot xid79", since=NOW)
    return repairs.open_repair(node=node, reason=event.summary, events=[event], at=NOW)


def in_repair(repair: Repair) -> Repair:
    """The evidence in, as its job would leave it."""
    repair.evidence = {"bug_report": {"present": False, "note": "not installed"}, "kernel_log": {"read": True}}
    repair.evidence_captured_at, repair.state = NOW, RepairState.EVIDENCE_CAPTURED
    repair.save()
    return repair


def test_viewers_read_the_repairs_and_change_nothing(repair, api_as, viewer, api_client):
    client = api_as(viewer)
    listed = client.get("/api/repairs/").json()
    assert listed["results"][0]["id"] == str(repair.public_id) and listed["results"][0]["node"] == "gpu006"
    one = client.get(f"/api/repairs/{repair.public_id}/").json()
    assert one["state"] == "open" and one["gate_kind"] == "gpu" and len(one["events"]) == 1
    for action in ("capture-evidence", "start-work", "parts", "start-validation", "return", "close"):
        assert client.post(f"/api/repairs/{repair.public_id}/{action}/", {}, format="json").status_code == 403
    assert client.post("/api/repairs/", {"node": "gpu001", "reason": "x"}, format="json").status_code == 403
    assert api_client.get("/api/repairs/").status_code in (401, 403)
    repair.refresh_from_db()
    assert repair.state == RepairState.OPEN and not Job.objects.exists() and Repair.objects.count() == 1


def test_operators_act_and_a_refusal_names_the_field(repair, api_as, operator, on_the_simulator):
    client = api_as(operator)
    base = f"/api/repairs/{repair.public_id}"
    early = client.post(f"{base}/start-work/", {}, format="json")
    assert early.status_code == 400 and "Capture the evidence first" in early.json()["repair"][0]
    started = client.post(f"{base}/capture-evidence/", format="json")
    assert started.status_code == 201 and started.json()["kind"] == "repair-evidence"
    in_repair(repair)
    missing = client.post(f"{base}/parts/", {"component_type": "gpu", "gpu_index": 2}, format="json")
    assert missing.status_code == 400 and "new_serial" in missing.json()
    no_gpu = client.post(f"{base}/parts/", {"component_type": "gpu", "gpu_index": 9, "new_serial": "S9"}, format="json")
    assert no_gpu.status_code == 400 and "gpu_index" in no_gpu.json()
    assert not PartReplacement.objects.exists()
    part = client.post(f"{base}/parts/", {"component_type": "gpu", "gpu_index": 2, "new_serial": "S2"}, format="json")
    assert part.status_code == 201 and part.json()["new_serial"] == "S2"
    assert Gpu.objects.get(node__hostname="gpu006", index=2).serial == "S2"
    history = client.get("/api/repairs/part-history/", {"serial": "S2"}).json()
    assert [item["node"] for item in history] == ["gpu006"]
    assert client.get("/api/repairs/part-history/").status_code == 400
    assert client.get("/api/repairs/part-history/", {"serial": " "}).status_code == 400  # the schema says: not blank
    unvalidated = client.post(f"{base}/return/", format="json")
    assert unvalidated.status_code == 400 and "gate" in unvalidated.json()
    assert Node.objects.get(hostname="gpu006").is_drained
    blank = client.post(f"{base}/close/", {"note": ""}, format="json")
    assert blank.status_code == 400 and "note" in blank.json()
    closed = client.post(f"{base}/close/", {"note": "sent back to the vendor"}, format="json")
    assert closed.status_code == 200 and closed.json()["state"] == "closed"
    entries = AuditEntry.objects.for_object(repair)
    assert entries.filter(actor=operator, source="api", changes__has_key="state").exists()
    assert AuditEntry.objects.filter(object_type="remediation.partreplacement", actor=operator).exists()


def test_an_operator_opens_a_repair_by_hand_and_a_second_joins_it(demo_cluster, api_as, operator):
    client = api_as(operator)
    bad = client.post("/api/repairs/", {"node": "nope", "reason": ""}, format="json")
    assert bad.status_code == 400 and {"node", "reason"} <= set(bad.json())
    first = client.post("/api/repairs/", {"node": "gpu003", "reason": "fans loud"}, format="json")
    second = client.post("/api/repairs/", {"node": "gpu003", "reason": "again"}, format="json")
    assert first.status_code == second.status_code == 201 and first.json()["id"] == second.json()["id"]
    assert first.json()["gate_kind"] == "acceptance"  # no fault named: the whole acceptance


def test_a_node_in_repair_is_not_undrained_by_hand(repair, api_as, operator, browser_as):
    node = repair.node
    answer = api_as(operator).post(f"/api/nodes/{node.public_id}/undrain/")
    assert answer.status_code == 400 and "in repair" in answer.json()["nodes"][0]
    page = browser_as(operator).post(reverse("node-undrain", args=[node.public_id]), follow=True).content.decode()
    assert "was not undrained" in page
    node.refresh_from_db()
    assert node.is_drained


def test_the_pages_show_the_repair_and_only_operators_get_the_actions(repair, browser_as, viewer, operator):
    in_repair(repair)
    listed = browser_as(viewer).get("/remediation/repairs/").content.decode()
    assert f'data-repair="{repair.public_id}"' in listed and "gpu006" in listed
    page = browser_as(viewer).get(f"/remediation/repairs/{repair.public_id}/").content.decode()
    assert "GPU 2: XID 79" in page and "not installed" in page and 'id="repair-actions"' not in page
    assert browser_as(viewer).post(f"/remediation/repairs/{repair.public_id}/close/", {"note": "x"}).status_code == 403
    repair.refresh_from_db()
    assert repair.state == RepairState.EVIDENCE_CAPTURED
    page = browser_as(operator).get(f"/remediation/repairs/{repair.public_id}/").content.decode()
    assert 'id="repair-actions"' in page
    answer = (
        browser_as(operator)
        .post(
            f"/remediation/repairs/{repair.public_id}/record-part/",
            {"component_type": "other", "label": "PSU 2", "old_serial": "P1", "new_serial": "P2"},
            follow=True,
        )
        .content.decode()
    )
    assert "Recorded" in answer and "PSU 2" in answer
    refused = browser_as(operator).post(f"/remediation/repairs/{repair.public_id}/return/", follow=True)
    assert "Nothing changed" in refused.content.decode()
    serial = browser_as(viewer).get(f"/remediation/repairs/{repair.public_id}/", {"serial": "P2"}).content.decode()
    assert 'id="serial-history"' in serial and "put in" in serial


def test_the_node_page_tells_the_loop_in_time_order(repair, browser_as, viewer):
    in_repair(repair)
    page = browser_as(viewer).get(reverse("node-detail", args=[repair.node.public_id])).content.decode()
    assert 'id="node-history"' in page
    section = page[page.index('id="node-history"') :]
    order = [section.index(f'data-history="{what}"') for what in ("event", "drain", "repair", "evidence")]
    assert order == sorted(order)


def test_a_resume_that_cannot_start_changes_nothing_and_says_why(repair, settings):
    in_repair(repair)
    RepairGate.objects.create(repair=repair, kind="gpu", state="passed", started_at=NOW, finished_at=NOW)
    settings.RACKPILOT_SCHEDULER_CONTROLLER = "no-such-controller"
    with pytest.raises(serializers.ValidationError) as refused:
        repairs.return_to_service(repair=repair)
    assert "No scheduler controller" in str(refused.value.detail["resume"])
    repair.refresh_from_db()
    assert repair.state == RepairState.EVIDENCE_CAPTURED and repair.resume_job_id is None
    assert Node.objects.get(hostname="gpu006").is_drained and not Job.objects.exists()


def test_repaired_validate_now_starts_the_gate_with_the_work_done_and_a_gate_that_cannot_start_keeps_it_in_repair(
    repair, api_as, operator, browser_as, on_the_simulator
):
    in_repair(repair)
    page = browser_as(operator).get(f"/remediation/repairs/{repair.public_id}/").content.decode()
    assert "Repaired: validate now" in page and "Return to service" not in page  # nothing passed yet
    base = f"/api/repairs/{repair.public_id}"
    answer = api_as(operator).post(f"{base}/start-validation/", {"note": "GPU 2 reseated"}, format="json")
    assert answer.status_code == 201 and answer.json()["kind"] == "gpu" and len(answer.json()["benchmark_runs"]) == 2
    repair.refresh_from_db()
    assert repair.state == RepairState.VALIDATING
    assert f"{operator.username}: Work done: GPU 2 reseated. Validation started (GPU gate): burn-in, nvbandwidth." in (
        repair.notes
    )
    assert AuditEntry.objects.for_object(repair).filter(actor=operator, changes__has_key="notes").exists()
    page = browser_as(operator).get(f"/remediation/repairs/{repair.public_id}/").content.decode()
    assert "Repaired: validate now" not in page and "Return to service" not in page  # the gate is running

    # A link fault on a node whose leaf has no healthy mate in service: no partner, the repair stays in repair.
    other = Node.objects.get(hostname="gpu007")
    link = health.record_event(
        component=other, source=Source.SWEEP, kind="link_errors", severity=Severity.MAJOR, summary="CRC errors",
    )  # fmt: skip
    drain_nodes(nodes=[other], reason="link", since=NOW)
    stuck = in_repair(repairs.open_repair(node=other, reason="CRC", events=[link], at=NOW))
    stuck.state = RepairState.IN_REPAIR
    stuck.save()
    mates = [n for n in Node.objects.filter(role="compute").exclude(pk=other.pk) if repairs.shared_leaf([other, n])]
    drain_nodes(nodes=mates, reason="rack maintenance")
    refused = api_as(operator).post(f"/api/repairs/{stuck.public_id}/start-validation/", {"note": "cable swapped"})
    assert refused.status_code == 400 and "No known-good partner for gpu007" in refused.json()["gate"][0]
    stuck.refresh_from_db()
    assert stuck.state == RepairState.IN_REPAIR and "cable swapped" not in stuck.notes and not stuck.gates.exists()


def test_return_to_service_is_offered_once_the_gate_passed_and_says_the_resume_is_running(
    repair, browser_as, operator, on_the_simulator
):
    in_repair(repair)
    RepairGate.objects.create(repair=repair, kind="gpu", state="passed", started_at=NOW, finished_at=NOW)
    repair.state = RepairState.VALIDATING
    repair.save()
    client = browser_as(operator)
    assert "Return to service" in client.get(f"/remediation/repairs/{repair.public_id}/").content.decode()
    answer = client.post(f"/remediation/repairs/{repair.public_id}/return/", follow=True).content.decode()
    repair.refresh_from_db()
    assert repair.state == RepairState.RETURNING
    assert f"Returning gpu006 to service: scheduler job {repair.resume_job_id}" in answer
    assert (
        "Returning to service: the scheduler's resume is running" in answer
        and "Return to service</button>" not in answer
    )
