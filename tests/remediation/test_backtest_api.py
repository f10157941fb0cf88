"""The back-test, reliability and cost over the REST API: operators back-test a candidate (nothing saved), viewers
and anonymous callers are refused; bad fields are 400s naming them; the reliability report validates its window;
health events carry their GPU-hours lost; the pages render and viewers see no back-test form."""

import datetime as dt

import pytest
from django.utils import timezone

from apps.core.models import AuditEntry
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Gpu, Node, Rack
from apps.remediation.models import RemediationDecision, RemediationPolicy

pytestmark = pytest.mark.django_db

URL = "/api/remediation-policies/backtest/"


@pytest.fixture
def fleet(clock, demo_cluster):
    RemediationPolicy.objects.all().delete()
    policy = RemediationPolicy.objects.create(
        name="xid79", kind_pattern="xid79", min_severity=Severity.CRITICAL, action="quarantine", mode="shadow"
    )
    health.record_event(
        component=Gpu.objects.get(node__hostname="gpu004", index=1),
        source=Source.TELEMETRY,
        kind="xid79",
        severity=Severity.CRITICAL,
        summary="GPU 1: XID 79",
        at=timezone.now() - dt.timedelta(hours=2),
    )
    return policy


@pytest.mark.parametrize(("canary", "mode"), [("its own", "on"), ("another", "shadow")])
def test_an_operator_back_tests_a_change_and_nothing_is_saved(api_as, operator, fleet, canary, mode):
    client = api_as(operator)
    audits = AuditEntry.objects.count()
    own = Node.objects.get(hostname="gpu004").rack
    rack = own if canary == "its own" else Rack.objects.exclude(pk=own.pk).filter(nodes__role="compute").first()
    body = {"policy": str(fleet.public_id), "mode": "on", "canary_racks": [str(rack.public_id)], "window": "1d"}
    answer = client.post(URL, body, format="json")
    assert answer.status_code == 200, answer.json()
    (replay,) = answer.json()["replays"]
    assert replay["source"] == "recorded" and replay["events"] == 1
    (meant,) = replay["in_force"]["decisions"]
    assert (meant["mode"], meant["outcome"], meant["node"]) == ("shadow", "would_act", "gpu004")
    (decided,) = replay["candidate"]["decisions"]
    # On, with canary racks: acts only on their nodes, and stays in shadow on the others.
    assert decided["mode"] == mode
    fleet.refresh_from_db()
    assert fleet.mode == "shadow" and not fleet.canary_racks.exists()
    assert not RemediationDecision.objects.exists() and AuditEntry.objects.count() == audits


def test_a_new_candidate_with_a_campaign(api_as, operator, fleet):
    body = {"name": "link down", "kind_pattern": "link_down", "action": "quarantine", "campaign": True, "seed": 3}
    answer = api_as(operator).post(URL, body, format="json")
    assert answer.status_code == 200, answer.json()
    recorded, simulated = answer.json()["replays"]
    assert simulated["source"] == "campaign" and simulated["events"] > 16
    assert simulated["candidate"]["quarantines"] > 0 and simulated["in_force"]["quarantines"] < simulated["events"]
    assert not RemediationPolicy.objects.filter(name="link down").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"window": "1y"}, "window"),
        ({"breaker_max_nodes": 0}, "breaker_max_nodes"),
        ({"kind_pattern": "rm -rf /"}, "kind_pattern"),
        ({"seed": -1}, "seed"),
        ({"policy": "00000000-0000-0000-0000-000000000000"}, "policy"),
        ({"canary_racks": ["00000000-0000-0000-0000-000000000000"]}, "canary_racks"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_as, operator, fleet, body, field):
    answer = api_as(operator).post(
        URL, {"name": "n", "kind_pattern": "xid79", "action": "notify"} | body, format="json"
    )
    assert answer.status_code == 400 and field in answer.json(), answer.json()


def test_viewers_and_anonymous_callers_back_test_nothing(api_as, api_client, viewer, fleet):
    body = {"policy": str(fleet.public_id), "mode": "on"}
    assert api_as(viewer).post(URL, body, format="json").status_code == 403
    assert api_client.post(URL, body, format="json").status_code in (401, 403)


def test_the_reliability_report_and_its_window(api_as, viewer, fleet):
    answer = api_as(viewer).get("/api/reliability/?window=7d")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    gpu = next(row for row in body["mtbf"] if row["component_type"] == "gpu")
    assert gpu["failures"] == 1 and gpu["mtbf_hours"] == pytest.approx(gpu["operating_hours"])
    assert [row["node"] for row in body["nodes"]] == ["gpu004"]
    bad = api_as(viewer).get("/api/reliability/?window=1y")
    assert bad.status_code == 400 and list(bad.json()) == ["window"]
    assert api_as(viewer).get("/api/reliability/?windw=7d").status_code == 400


def test_health_events_carry_their_gpu_hours_lost(api_as, viewer, fleet):
    (event,) = api_as(viewer).get("/api/health-events/").json()["results"]
    assert event["gpu_hours_lost"] == 0  # no training job ran there, and gpu004 was never drained
    one = api_as(viewer).get(f"/api/health-events/{event['id']}/").json()
    assert one["gpu_hours_lost"] == 0


def test_the_pages_render_and_viewers_see_no_back_test_form(browser_as, viewer, operator, fleet):
    page = browser_as(viewer).get("/health/reliability/")
    assert page.status_code == 200 and b'id="lemon-nodes"' in page.content and b"gpu004" in page.content
    assert browser_as(viewer).get("/health/reliability/?window=1y").status_code == 400
    remediation = browser_as(viewer).get("/remediation/")
    assert remediation.status_code == 200 and b'id="backtest-form"' not in remediation.content
    assert browser_as(viewer).post("/remediation/backtest/", {"policy": str(fleet.public_id)}).status_code == 403


FORM = {
    "name": "xid79", "kind_pattern": "xid79", "min_severity": "critical", "action": "quarantine", "mode": "on",
    "enabled": "on", "breaker_max_nodes": 4, "breaker_max_percent": "5", "breaker_window_minutes": 60,
    "max_attempts": 1, "window": "1d", "seed": 1,
}  # fmt: skip


def test_an_operator_back_tests_on_the_page_and_saves_it_on_only_after_the_back_test(browser_as, operator, fleet):
    page = browser_as(operator)
    assert b'id="backtest-form"' in page.get("/remediation/").content
    assert page.get(f"/remediation/backtest/?policy={fleet.public_id}").status_code == 200
    body = FORM | {"policy": str(fleet.public_id)}
    # Saved "on" without a back-test: refused, naming the mode; nothing changes.
    refused = page.post("/remediation/backtest/", body | {"do": "save"})
    assert refused.status_code == 400 and b"Back-test these fields" in refused.content
    fleet.refresh_from_db()
    assert fleet.mode == "shadow"
    shown = page.post("/remediation/backtest/", body | {"do": "backtest"})
    assert (
        shown.status_code == 200 and b'data-source="recorded"' in shown.content and b'id="save-policy"' in shown.content
    )
    fleet.refresh_from_db()
    assert fleet.mode == "shadow" and not RemediationDecision.objects.exists()
    token = shown.context["backtested"]
    # Another field than the one back-tested: refused too.
    changed = page.post("/remediation/backtest/", body | {"do": "save", "backtested": token, "breaker_max_nodes": 9})
    assert changed.status_code == 400
    saved = page.post("/remediation/backtest/", body | {"do": "save", "backtested": token})
    assert saved.status_code == 302
    fleet.refresh_from_db()
    assert (fleet.mode, fleet.stage) == ("on", "fleet")
    assert AuditEntry.objects.for_object(fleet).filter(actor=operator).exists()


def test_a_bad_field_on_the_page_is_a_form_error(browser_as, operator, fleet):
    answer = browser_as(operator).post("/remediation/backtest/", FORM | {"breaker_max_nodes": 0, "do": "backtest"})
    assert answer.status_code == 400 and "breaker_max_nodes" in answer.context["form"].errors
    row = answer.content.decode().split('name="breaker_max_nodes"', 1)[1].split("</tr>", 1)[0]
    assert '<div class="error">' in row and "breaker_max_nodes:" not in row  # beside the field, not by its code name
