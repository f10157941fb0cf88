"""Notifications: a failed job, a node that degrades and a discovery that finds drift reach a real local HTTP
receiver as signed JSON (and e-mail); private addresses are refused unless the setting allows them, also at send
time; failures are retried a bounded number of times; the secret is never shown back or logged."""

import hashlib
import hmac
import json
import re
from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from apps.automation import notifications
from apps.automation.choices import DeliveryStatus
from apps.automation.models import Delivery, Notification, Subscription
from apps.core.models import AuditEntry
from apps.inventory.choices import NodeStatus
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db

SECRET = "a-shared-secret-of-some-length"
URL = "/api/subscriptions/"


def _subscribe(url, events=("job.failed",), **fields):
    return notifications.save_subscription(
        user=None,
        name=fields.pop("name", "ops hook"),
        channel="webhook",
        url=url,
        secret=SECRET,
        events=list(events),
        **fields,
    )


def _failed_job():
    job = Job.objects.create(
        kind="sleep",
        transport="sim",
        status=JobStatus.FAILED,
        summary="2 steps failed",
        finished=timezone.now(),
        node_count=2,
    )
    return job


def test_a_failed_job_reaches_the_receiver_signed(scan, allow_private, receiver, deliver_all, rack_of_nodes):
    _subscribe(receiver["url"])
    scan()  # the first scan only sets where scanning starts
    job = _failed_job()
    assert scan() == 1
    assert scan() == 0  # seen again (the look-back): recorded once

    assert deliver_all() == [DeliveryStatus.DELIVERED]

    (request,) = receiver["got"]
    body, headers = request["body"], request["headers"]
    expected = hmac.new(SECRET.encode(), headers["X-Rackpilot-Timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["X-Rackpilot-Signature"] == f"sha256={expected.hexdigest()}"
    assert headers["X-Rackpilot-Event"] == "job.failed" and request["path"] == "/hook?x=1"
    data = json.loads(body)
    assert data["event"] == "job.failed" and data["data"]["job"]["id"] == str(job.public_id)
    assert data["data"]["job"]["summary"] == "2 steps failed"
    delivery = Delivery.objects.get()
    assert delivery.response_status == 204 and delivery.attempts == 1 and delivery.delivered is not None


def test_a_node_that_degrades_is_an_event_and_goes_by_email(scan, allow_private, receiver, deliver_all, rack_of_nodes):
    _, nodes = rack_of_nodes
    notifications.save_subscription(
        user=None,
        name="on call",
        channel="email",
        recipients="oncall@example.org, lead@example.org",
        events=["node.degraded"],
    )
    _subscribe(receiver["url"], events=["node.degraded"], name="hook")
    scan()
    node = nodes[0]
    node.status = NodeStatus.READY
    node.save()
    node.status = NodeStatus.DEGRADED
    node.save()
    assert scan() == 1
    assert sorted(deliver_all()) == [DeliveryStatus.DELIVERED, DeliveryStatus.DELIVERED]
    (message,) = mail.outbox
    assert message.to == ["oncall@example.org", "lead@example.org"] and "gpu001 is now degraded" in message.subject
    payload = json.loads(receiver["got"][0]["body"])["data"]["node"]
    assert payload["status"] == "degraded" and payload["hostname"] == "gpu001"


def test_private_addresses_are_refused_when_saved_and_when_sent(scan, settings, receiver, deliver_all, api_as, admin):
    client = api_as(admin)
    for url in (
        "http://127.0.0.1:9/x",
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest",
        "http://[::1]/x",
        "http://192.168.0.10/",
        "ftp://example.org/x",
    ):
        answer = client.post(
            URL,
            {"name": "n", "channel": "webhook", "url": url, "secret": SECRET, "events": ["job.failed"]},
            format="json",
        )
        assert answer.status_code == 400 and "url" in answer.json(), url
    assert not Subscription.objects.exists()

    settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE = True
    subscription = _subscribe(receiver["url"])
    settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE = False  # the setting is turned off after: the send checks again
    scan()
    _failed_job()
    scan()
    assert deliver_all() == [DeliveryStatus.REFUSED]
    assert receiver["got"] == []
    assert "127.0.0.1" in Delivery.objects.get(subscription=subscription).error


def test_failures_are_retried_a_bounded_number_of_times(scan, allow_private, receiver, no_celery, rack_of_nodes):
    allow_private.RACKPILOT_WEBHOOK_MAX_ATTEMPTS = 3
    receiver["answers"].extend([500, 503, 500, 200])
    _subscribe(receiver["url"])
    scan()
    _failed_job()
    scan()
    statuses, waits = [], []
    while no_celery:
        delivery_id, countdown = no_celery.pop(0)
        waits.append(countdown)
        statuses.append(notifications.deliver(delivery_id=delivery_id))
    assert statuses == [DeliveryStatus.RETRYING, DeliveryStatus.RETRYING, DeliveryStatus.FAILED]
    assert waits == [0, 1, 2]  # backoff: RETRY_SECONDS × 2^(attempt-1)
    delivery = Delivery.objects.get()
    assert delivery.attempts == 3 and delivery.response_status == 500 and "HTTP 500" in delivery.error
    assert len(receiver["got"]) == 3


def test_a_receiver_that_hangs_times_out(scan, allow_private, deliver_all):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    allow_private.RACKPILOT_WEBHOOK_TIMEOUT_SECONDS = 1
    allow_private.RACKPILOT_WEBHOOK_MAX_ATTEMPTS = 1
    _subscribe(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    scan()
    _failed_job()
    scan()
    started = timezone.now()
    assert deliver_all() == [DeliveryStatus.FAILED]
    assert timezone.now() - started < timedelta(seconds=60)  # the 1 s timeout ended it, not a wait for ever
    assert "timed out" in Delivery.objects.get().error.lower()
    listener.close()


def test_the_secret_is_stored_encrypted_never_shown_and_viewers_only_read(
    allow_private, api_as, admin, operator, viewer, browser_as
):
    created = api_as(admin).post(
        URL,
        {
            "name": "ops",
            "channel": "webhook",
            "url": "http://127.0.0.1:9/h",
            "secret": SECRET,
            "events": ["job.failed", "node.unhealthy"],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert "secret" not in created.json() and created.json()["has_secret"] is True
    subscription = Subscription.objects.get()
    assert SECRET not in subscription.secret_encrypted and subscription.secret() == SECRET
    shown = (
        json.dumps(api_as(viewer).get(URL).json())
        + browser_as(admin).get(reverse("automation-subscription-edit", args=[subscription.public_id])).content.decode()
    )
    assert SECRET not in shown and subscription.secret_encrypted not in shown
    entries = json.dumps(list(AuditEntry.objects.filter(object_type="automation.subscription").values("changes")))
    assert SECRET not in entries and subscription.secret_encrypted not in entries and "set #" in entries
    for user in (viewer, operator):
        assert (
            api_as(user)
            .post(
                URL,
                {"name": "x", "channel": "email", "recipients": ["a@example.org"], "events": ["job.failed"]},
                format="json",
            )
            .status_code
            == 403
        )
    kept = api_as(admin).patch(f"{URL}{subscription.public_id}/", {"name": "ops 2"}, format="json")
    assert kept.status_code == 200 and Subscription.objects.get().secret() == SECRET
    short = api_as(admin).post(
        URL,
        {"name": "y", "channel": "webhook", "url": "http://127.0.0.1:9/h", "secret": "short", "events": ["job.failed"]},
        format="json",
    )
    assert short.status_code == 400 and "secret" in short.json()
    assert api_as(viewer).get("/api/deliveries/").status_code == 200
    page = browser_as(viewer).get(reverse("automation-notifications")).content.decode()
    assert "ops 2" in page and "Send a test" not in page


def test_discovery_drift_is_an_event(scan, allow_private, receiver, deliver_all, rack_of_nodes):
    from apps.discovery.models import Difference

    _, nodes = rack_of_nodes
    _subscribe(receiver["url"], events=["discovery.drift"])
    scan()
    job = Job.objects.create(kind="discover", transport="sim", status=JobStatus.SUCCEEDED, finished=timezone.now())
    Difference.objects.create(
        job=job, node=nodes[1], object_type="nic", object_key="ens1np0", field="mtu", expected="9000", discovered="1500"
    )
    assert scan() == 1
    deliver_all()
    data = json.loads(receiver["got"][0]["body"])["data"]
    assert data["count"] == 1 and data["differences"][0] == {
        "node": "gpu002",
        "object": "ens1np0",
        "field": "mtu",
        "expected": "9000",
        "discovered": "1500",
    }
    assert Notification.objects.get().event == "discovery.drift"


def test_fleet_health_turning_unhealthy_is_an_event(scan, allow_private, receiver, deliver_all, rack_of_nodes):
    allow_private.RACKPILOT_NOTIFY_HEALTH_SECONDS = 0
    _, nodes = rack_of_nodes
    for node in nodes:
        node.status = NodeStatus.READY
        node.save()
    _subscribe(receiver["url"], events=["node.unhealthy"])
    scan()  # first look: every node recorded, no event
    assert not Notification.objects.exists()
    from apps.inventory.models import Node

    Node.objects.filter(pk=nodes[2].pk).update(status=NodeStatus.FAILED)  # not through save: health sees it anyway
    assert scan() == 1
    assert scan() == 0  # still unhealthy: no repeat
    deliver_all()
    assert json.loads(receiver["got"][0]["body"])["data"]["node"]["hostname"] == "gpu003"


def test_a_test_notification_is_sent_as_a_test_not_as_a_failed_job(
    allow_private, receiver, deliver_all, api_as, admin, django_capture_on_commit_callbacks
):
    """A receiver that acts on job.failed (pages someone) must not take the page's "Send a test" for a failed job."""
    subscription = _subscribe(receiver["url"])

    with django_capture_on_commit_callbacks(execute=True):
        answer = api_as(admin).post(f"{URL}{subscription.public_id}/test/")
    assert answer.status_code == 201
    assert deliver_all() == [DeliveryStatus.DELIVERED]

    (request,) = receiver["got"]
    assert request["headers"]["X-Rackpilot-Event"] == "notification.test"
    assert json.loads(request["body"])["event"] == "notification.test"
    # Only the subscription it tests receives one: no subscription can ask for tests.
    refused = api_as(admin).post(
        URL,
        {"name": "t", "channel": "webhook", "url": receiver["url"], "secret": SECRET, "events": ["notification.test"]},
        format="json",
    )
    assert refused.status_code == 400 and "events" in refused.json()


def test_a_mail_that_did_not_go_says_where_and_what_to_set(settings):
    """The delivery log read "e-mail: ConnectionRefusedError: [Errno 111] Connection refused"."""
    settings.EMAIL_HOST, settings.EMAIL_PORT = "mail.example.org", 2525

    refused = notifications._mail_failure(ConnectionRefusedError(111, "Connection refused"))
    unreachable = notifications._mail_failure(OSError(113, "No route to host"))

    assert refused.startswith("no mail server answers at mail.example.org:2525") and "RACKPILOT_EMAIL_HOST" in refused
    assert unreachable == "could not reach the mail server at mail.example.org:2525: No route to host"


def test_a_test_send_is_in_the_audit_log_with_who_which_and_how_it_ended(
    settings, allow_private, receiver, deliver_all, browser_as, admin, django_capture_on_commit_callbacks
):
    """ "Send a test" left no trace in the audit log: it says who sent one to which subscription, then how it ended."""
    subscription = _subscribe(receiver["url"])
    client = browser_as(admin)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("automation-subscription-test", args=[subscription.public_id]))
    deliver_all()
    settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE = False  # the second test is refused at send
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("automation-subscription-test", args=[subscription.public_id]))
    deliver_all()

    log = client.get("/audit/?object_type=automation.subscription").content.decode()
    rows = [re.findall(r"<td>([^<]*)</td>", row) for row in log.split("<tr>") if "<strong>ops hook</strong>" in row]
    said = [(cells[1], cells[3]) for cells in reversed(rows)]  # the log lists the newest first
    assert said[1:] == [
        (admin.username, "Test sent"),
        (admin.username, "Test delivered"),
        (admin.username, "Test sent"),
        (admin.username, "Test failed"),
    ]  # the first: the subscription was created
    failed = AuditEntry.objects.get(action="test_failed")
    assert (
        failed.changes["outcome"] == [None, "Refused (address not allowed)"]
        and "127.0.0.1" in failed.changes["error"][1]
    )


def test_deleting_a_subscription_keeps_its_delivery_history(
    allow_private, receiver, deliver_all, browser_as, admin, django_capture_on_commit_callbacks
):
    """The delivery log is history: deleting a subscription deleted every delivery it had had (a cascade)."""
    subscription = _subscribe(receiver["url"])
    with django_capture_on_commit_callbacks(execute=True):
        notifications.send_test(subscription=subscription, user=admin)
    deliver_all()
    client = browser_as(admin)

    client.post(reverse("automation-subscription-delete", args=[subscription.public_id]))

    delivery = Delivery.objects.get()
    assert delivery.subscription is None and delivery.status == DeliveryStatus.DELIVERED
    page = client.get(reverse("automation-notifications")).content.decode()
    assert "<td>ops hook</td>" in page.split('id="deliveries"')[1]
    assert client.get("/api/deliveries/?subscription=ops+hook").json()["results"][0]["subscription"] == "ops hook"
