"""Remediation's decisions that need a person reach the subscriptions that chose them: a `notify` policy that acts,
the circuit breaker (one page per trip, naming the leaf switch its nodes share), a fault back at the attempt cap and
an action that could not start. Shadow decisions are never sent. Time is passed in (`now=`), never read."""

import datetime as dt
import json

import pytest
from django.core import mail

from apps.automation import notifications
from apps.automation.choices import DeliveryStatus, EventType
from apps.automation.models import Delivery, Notification
from apps.health import services as health
from apps.health.choices import ClearedBy, Severity, Source
from apps.health.models import HealthEvent
from apps.inventory.models import Cable
from apps.remediation import services as remediation
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import RemediationDecision, RemediationPolicy
from tests.factories import make_gpu, make_nic, make_node, make_rack, make_switch

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
SECRET = "a-shared-secret-of-some-length"


def minutes(n: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n)


@pytest.fixture
def leaf():
    """16 compute nodes, each with a GPU and a NIC cabled to one leaf switch."""
    rack = make_rack(name="r07")
    switch = make_switch(name="leaf-r07")
    for n in range(1, 17):
        node = make_node(hostname=f"gpu{n:03d}", rack=rack)
        make_gpu(node=node, index=0)
        Cable.objects.create(a_nic=make_nic(node=node), b_switch=switch, b_port=f"swp{n}", speed_gbps=400)
    return switch


@pytest.fixture
def scan_at(django_capture_on_commit_callbacks):
    """notifications.scan_events(now=…), its on-commit sends run as a commit would run them."""

    def run(now: dt.datetime) -> int:
        with django_capture_on_commit_callbacks(execute=True):
            return notifications.scan_events(now=now)

    return run


@pytest.fixture
def subscribers(allow_private, receiver):
    """A webhook for `remediation.notify` only and an e-mail for the breaker only."""
    notifications.save_subscription(
        user=None,
        name="hook",
        channel="webhook",
        url=receiver["url"],
        secret=SECRET,
        events=[EventType.REMEDIATION_NOTIFY],
    )
    notifications.save_subscription(
        user=None,
        name="on call",
        channel="email",
        recipients="oncall@example.org",
        events=[EventType.REMEDIATION_BREAKER, EventType.REMEDIATION_ESCALATED, EventType.REMEDIATION_FAILED],
    )
    return receiver


def policy(**fields) -> RemediationPolicy:
    RemediationPolicy.objects.all().delete()  # the shipped defaults step aside for the policy under test
    values = {"name": "thermal", "kind_pattern": "thermal", "min_severity": Severity.MAJOR, "action": Action.NOTIFY}
    return RemediationPolicy.objects.create(**(values | fields))


def fault(hostname: str, at: dt.datetime, kind: str = "thermal") -> HealthEvent:
    from apps.inventory.models import Gpu

    return health.record_event(
        component=Gpu.objects.get(node__hostname=hostname, index=0),
        source=Source.TELEMETRY,
        kind=kind,
        severity=Severity.CRITICAL,
        summary=f"GPU 0: {kind}",
        at=at,
    )


def evaluate(now: dt.datetime) -> list[RemediationDecision]:
    return remediation.evaluate(now=now, transport="sim", queue=False)


def test_a_notify_decision_is_delivered_once_to_its_subscribers_only(leaf, subscribers, scan_at, deliver_all, settings):
    policy(mode=Mode.ON)
    scan_at(T0)  # the first scan only sets where scanning starts
    event = fault("gpu003", at=minutes(1))
    (decision,) = evaluate(minutes(1))
    assert (decision.action, decision.outcome) == (Action.NOTIFY, Outcome.ACTED)

    assert scan_at(minutes(2)) == 1
    assert scan_at(minutes(3)) == 0  # seen again (the look-back): recorded once
    assert deliver_all() == [DeliveryStatus.DELIVERED]

    (request,) = subscribers["got"]  # the webhook that chose remediation.notify; the e-mail did not
    assert request["headers"]["X-Rackpilot-Event"] == "remediation.notify"
    body = json.loads(request["body"])
    assert body["title"] == "gpu003: thermal (critical): GPU 0: thermal"
    sent = body["data"]["decision"]
    assert (sent["policy"], sent["action"], sent["outcome"], sent["reason"]) == (
        "thermal", "notify", "acted", decision.reason,
    )  # fmt: skip
    assert sent["event"]["kind"] == "thermal" and sent["event"]["severity"] == "critical"
    assert sent["event"]["component"] == event.component_label and sent["node"]["hostname"] == "gpu003"
    base = settings.RACKPILOT_BASE_URL.rstrip("/")
    assert sent["event"]["url"] == f"{base}/api/health-events/{event.public_id}/"
    assert sent["page"] == f"{base}/remediation/"
    assert mail.outbox == [] and Delivery.objects.count() == 1


def test_a_shadow_decision_would_notify_and_sends_nothing(leaf, subscribers, scan_at, deliver_all):
    policy(mode=Mode.SHADOW)
    scan_at(T0)
    fault("gpu003", at=minutes(1))
    (decision,) = evaluate(minutes(1))
    assert decision.outcome == Outcome.WOULD_ACT
    assert scan_at(minutes(2)) == 0
    assert not Notification.objects.exists() and deliver_all() == []


def taken_out(hostnames: list[str], policy: RemediationPolicy, at: dt.datetime, kind: str = "xid79") -> None:
    """Quarantines automation already made ("on"), as the breaker counts them."""
    for hostname in hostnames:
        event = fault(hostname, at=at, kind=kind)
        RemediationDecision.objects.create(
            event=event, policy=policy, node=event.node, kind=event.kind, mode=Mode.ON, action=Action.QUARANTINE,
            outcome=Outcome.ACTED, reason=f"Started: drain {hostname} through the scheduler", decided_at=at,
        )  # fmt: skip


def test_ten_breaker_refusals_in_one_trip_are_one_page_naming_the_leaf(leaf, subscribers, scan_at, deliver_all):
    xid = policy(
        name="xid79", kind_pattern="xid79", action=Action.QUARANTINE, mode=Mode.ON,
        breaker_max_nodes=4, breaker_max_percent=100, breaker_window_minutes=60,
    )  # fmt: skip
    scan_at(T0)
    taken_out(["gpu001", "gpu002", "gpu003", "gpu004"], xid, at=minutes(1))
    for n in range(5, 15):
        fault(f"gpu{n:03d}", at=minutes(2), kind="xid79")
    refused = evaluate(minutes(2))
    assert len(refused) == 10 and {d.outcome for d in refused} == {Outcome.REFUSED}
    assert all(d.reason.startswith(remediation.BREAKER_TRIPPED) for d in refused)

    assert scan_at(minutes(3)) == 1
    assert scan_at(minutes(4)) == 0
    (page,) = Notification.objects.filter(event=EventType.REMEDIATION_BREAKER)
    assert page.title.startswith("Automation stopped at the circuit breaker: 10 nodes left in service (gpu005, ")
    assert "all behind leaf switch leaf-r07: suspect the switch" in page.title
    assert page.payload["breaker"]["leaf_switches"] == ["leaf-r07"]
    assert page.payload["breaker"]["nodes"] == [f"gpu{n:03d}" for n in range(5, 15)]
    assert len(page.payload["decisions"]) == 10

    # Another refusal 30 minutes on is the same trip: no second page.
    fault("gpu015", at=minutes(32), kind="xid79")
    (later,) = evaluate(minutes(32))
    assert later.reason.startswith(remediation.BREAKER_TRIPPED)
    assert scan_at(minutes(33)) == 0

    assert deliver_all() == [DeliveryStatus.DELIVERED]  # the e-mail that chose the breaker; the webhook did not
    (message,) = mail.outbox
    assert "leaf switch leaf-r07" in message.subject and message.to == ["oncall@example.org"]
    assert subscribers["got"] == []

    # Past the window (no refusal within 60 minutes of the last), a new trip is a new page.
    taken_out(["gpu005", "gpu006", "gpu007", "gpu008"], xid, at=minutes(200), kind="xid79_back")
    fault("gpu016", at=minutes(201), kind="xid79")
    (again,) = evaluate(minutes(201))
    assert again.reason.startswith(remediation.BREAKER_TRIPPED)
    assert scan_at(minutes(202)) == 1
    assert Notification.objects.filter(event=EventType.REMEDIATION_BREAKER).count() == 2


def test_a_shadow_breaker_sends_nothing(leaf, subscribers, scan_at):
    policy(name="xid79", kind_pattern="xid79", action=Action.QUARANTINE, mode=Mode.SHADOW, breaker_max_nodes=1)
    scan_at(T0)
    fault("gpu001", at=minutes(1), kind="xid79")
    fault("gpu002", at=minutes(1), kind="xid79")
    would, refused = evaluate(minutes(1))
    assert (would.outcome, refused.outcome) == (Outcome.WOULD_ACT, Outcome.REFUSED)
    assert refused.reason.startswith(remediation.BREAKER_TRIPPED)
    assert scan_at(minutes(2)) == 0


def test_the_attempt_cap_and_a_failed_action_need_a_person(leaf, subscribers, scan_at, deliver_all):
    policy(mode=Mode.ON, max_attempts=1)
    scan_at(T0)
    outcomes = []
    for hour in range(3):  # the same fault back on gpu002 after each notice
        at = T0 + dt.timedelta(hours=hour)
        event = fault("gpu002", at=at)
        (decision,) = evaluate(at)
        outcomes.append((decision.outcome, decision.escalated))
        HealthEvent.objects.filter(pk=event.pk).update(
            cleared_at=at + dt.timedelta(minutes=30), cleared_by=ClearedBy.VALIDATION
        )
        scan_at(at + dt.timedelta(minutes=1))
    assert outcomes == [(Outcome.ACTED, False), (Outcome.ACTED, True), (Outcome.REFUSED, True)]
    recorded = list(Notification.objects.order_by("created", "id").values_list("event", "title"))
    assert [event for event, _ in recorded] == ["remediation.notify", "remediation.notify", "remediation.escalated"]
    assert recorded[2][1].startswith("thermal: Cap reached: 2 actions on gpu002 for thermal already")

    # A quarantine "on" with no scheduler controller to drain through fails, saying why.
    policy(name="xid79", kind_pattern="xid79", action=Action.QUARANTINE, mode=Mode.ON)
    fault("gpu010", at=minutes(300), kind="xid79")
    (failed,) = evaluate(minutes(300))
    assert failed.outcome == Outcome.FAILED
    assert scan_at(minutes(301)) == 1
    notice = Notification.objects.get(event=EventType.REMEDIATION_FAILED)
    assert notice.title == f"xid79: {failed.reason}"
    assert notice.payload["decision"]["node"]["hostname"] == "gpu010"
