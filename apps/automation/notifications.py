"""Notifications: find what happened (a scan of the jobs, deployments' suggestions, the audit log's node status
changes, discovery's differences, remediation's decisions and fleet health), record each event once under its key,
and deliver it to the subscriptions that chose its type: webhooks (signed JSON, retried a bounded number of times on
the system queue) and e-mail (Django's e-mail backend). Every attempt is in the delivery log.

The scan reads other apps' rows and writes only this app's. It runs every RACKPILOT_NOTIFY_SCAN_SECONDS from beat
(rackpilot.automation.scan_events) or the embedded loop; several at once record each event once (unique keys).
"""

import json
import logging
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.automation import webhooks
from apps.automation.choices import DELIVERY_OPEN, SUBSCRIBABLE_EVENTS, Channel, DeliveryStatus, EventType
from apps.automation.models import Delivery, NodeHealthState, Notification, ScanCursor, Subscription
from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from apps.core.text import counted
from apps.deployments.choices import SuggestionState
from apps.deployments.models import Suggestion
from apps.discovery.choices import DifferenceState
from apps.discovery.models import Difference
from apps.inventory.choices import NodeStatus
from apps.inventory.models import Node
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from apps.remediation.choices import Action, Mode, Outcome
from apps.remediation.models import RemediationDecision
from apps.remediation.services import BREAKER_TRIPPED, SUSPECT_LEAF

logger = logging.getLogger(__name__)

DELIVER_TASK = "rackpilot.automation.deliver"
LOOKBACK = timedelta(minutes=5)  # rows committed late (a long transaction) are still seen; keys deduplicate
DEGRADED = {NodeStatus.DEGRADED, NodeStatus.FAILED}
CAP_REACHED = "Cap reached"  # how the evaluator's attempt-cap refusal begins (apps/remediation/services.py, _plan)


def _link(path: str) -> str:
    return settings.RACKPILOT_BASE_URL.rstrip("/") + path


# --- recording events ----------------------------------------------------------------------------------------------


def notify(*, key: str, event: str, title: str, payload: dict) -> Notification | None:
    """Record an event once (None when its key was recorded before) and queue a delivery to each enabled
    subscription that chose its type."""
    try:
        with transaction.atomic():
            notification = Notification.objects.create(key=key[:200], event=event, title=title[:300], payload=payload)
    except IntegrityError:
        return None
    subscriptions = [s for s in Subscription.objects.filter(enabled=True) if event in (s.events or [])]
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(notification=notification, subscription=subscription, subscription_name=subscription.name)
            for subscription in subscriptions
        ]
    )
    ids = [str(delivery.public_id) for delivery in deliveries]
    transaction.on_commit(lambda: [enqueue_delivery(delivery_id) for delivery_id in ids])
    return notification


def enqueue_delivery(delivery_id: str, *, countdown: float = 0) -> None:
    current_app.signature(DELIVER_TASK).apply_async(args=[delivery_id], countdown=countdown or None)


def _cursor(name: str, now) -> tuple[ScanCursor, bool]:
    return ScanCursor.objects.get_or_create(name=name, defaults={"at": now})


def scan_events(*, now=None) -> int:
    """Record what happened since the last scan (looking back LOOKBACK further). The first scan only sets the cursor:
    history from before notifications were turned on is not sent. Returns how many events were recorded."""
    now = now or timezone.now()
    cursor, first = _cursor("events", now)
    recorded = 0
    if not first:
        since = cursor.at - LOOKBACK
        for found in (_failed_jobs, _drift, _suggestions, _degraded_nodes, _remediation):
            for item in found(since, now):
                recorded += notify(**item) is not None
        ScanCursor.objects.filter(pk=cursor.pk).update(at=now, updated=now)
    recorded += scan_health(now=now)
    return recorded


def _failed_jobs(since, now):
    failed = Job.objects.filter(finished__gt=since, finished__lte=now, status__in=[JobStatus.FAILED, JobStatus.ERROR])
    for job in failed.order_by("finished"):
        yield {
            "key": f"job.failed:{job.public_id}",
            "event": EventType.JOB_FAILED,
            "title": f"{job.kind} job {job.status}: {job.summary or 'no summary'}",
            "payload": {
                "job": {
                    "id": str(job.public_id),
                    "kind": job.kind,
                    "status": job.status,
                    "summary": job.summary,
                    "node_count": job.node_count,
                    "finished": job.finished.isoformat(),
                    "url": _link(reverse("job-page", args=[job.public_id])),
                }
            },
        }


def _drift(since, now):
    jobs = Job.objects.filter(kind="discover", finished__gt=since, finished__lte=now).order_by("finished")
    for job in jobs:
        differences = Difference.objects.filter(job=job, state=DifferenceState.OPEN).select_related("node")
        rows = list(differences[:50])
        if not rows:
            continue
        count = differences.count()
        nodes = sorted({row.node.hostname for row in rows})
        yield {
            "key": f"discovery.drift:{job.public_id}",
            "event": EventType.DISCOVERY_DRIFT,
            "title": f"discovery found {counted(count, 'difference')} from the inventory on {', '.join(nodes[:10])}",
            "payload": {
                "job": {"id": str(job.public_id), "url": _link(reverse("job-page", args=[job.public_id]))},
                "differences": [
                    {
                        "node": row.node.hostname,
                        "object": row.object_key,
                        "field": row.field,
                        "expected": row.expected,
                        "discovered": row.discovered,
                    }
                    for row in rows
                ],
                "count": count,
            },
        }


def _suggestions(since, now):
    opened = Suggestion.objects.filter(created__gt=since, created__lte=now, state=SuggestionState.OPEN)
    for suggestion in opened.select_related("deployment").order_by("created", "id"):
        yield {
            "key": f"suggestion.opened:{suggestion.public_id}",
            "event": EventType.SUGGESTION_OPENED,
            "title": f"{suggestion.hostname}: {suggestion.title}",
            "payload": {
                "suggestion": {
                    "id": str(suggestion.public_id),
                    "node": suggestion.hostname,
                    "step": suggestion.step,
                    "problem": suggestion.problem,
                    "title": suggestion.title,
                    "cause": suggestion.cause,
                    "fix": suggestion.fix,
                    "deployment": str(suggestion.deployment.public_id),
                    "url": _link(reverse("deployment-suggestions", args=[suggestion.deployment.public_id])),
                }
            },
        }


def _degraded_nodes(since, now):
    entries = AuditEntry.objects.filter(
        object_type="inventory.node",
        action__in=[AuditAction.UPDATE, AuditAction.CREATE],
        created__gt=since,
        created__lte=now,
    ).order_by("created", "id")
    for entry in entries:
        change = (entry.changes or {}).get("status")
        if not isinstance(change, list) or len(change) != 2 or change[1] not in DEGRADED or change[0] == change[1]:
            continue
        node = Node.objects.filter(pk=entry.object_id).only("public_id", "hostname").first()
        yield {
            "key": f"node.degraded:{entry.pk}",
            "event": EventType.NODE_DEGRADED,
            "title": f"{entry.object_repr} is now {change[1]} (was {change[0] or 'new'})",
            "payload": {
                "node": {
                    "hostname": entry.object_repr,
                    "id": str(node.public_id) if node else None,
                    "status": change[1],
                    "previous_status": change[0],
                    "by": entry.actor_name or entry.get_source_display(),
                    "url": _link(reverse("node-detail", args=[node.public_id])) if node else None,
                }
            },
        }


def _remediation(since, now):
    """Remediation's decisions that need a person, "on" mode only (a shadow decision is what automation would have
    done: recorded on the remediation page, never sent): a notify policy that acted, an action that could not start,
    a fault back after its action (escalated, or refused at the attempt cap), and the circuit breaker, once per trip.
    A deferred quarantine fails, if it does, when it is drained: `drained_at` brings it into the scan then."""
    decisions = (
        RemediationDecision.objects.filter(mode=Mode.ON)
        .filter(Q(decided_at__gt=since, decided_at__lte=now) | Q(drained_at__gt=since, drained_at__lte=now))
        .select_related("event", "policy", "node")
        .order_by("decided_at", "id")
    )
    tripped = []
    for decision in decisions:
        if decision.outcome == Outcome.REFUSED and decision.reason.startswith(BREAKER_TRIPPED):
            tripped.append(decision)
            continue
        found = _needs_a_person(decision)
        if found is not None:
            event, title = found
            yield {
                "key": f"{event}:{decision.public_id}",
                "event": event,
                "title": title,
                "payload": {"decision": _decision_data(decision)},
            }
    yield from _breaker_trips(tripped)


def _needs_a_person(decision: RemediationDecision) -> tuple[str, str] | None:
    """The event type and title of a decision a person hears of, or None."""
    where = decision.node.hostname if decision.node else decision.event.component_label
    if decision.outcome == Outcome.FAILED:
        return EventType.REMEDIATION_FAILED, f"{decision.policy.name}: {decision.reason}"
    if decision.action == Action.NOTIFY and decision.outcome == Outcome.ACTED:
        event = decision.event
        return EventType.REMEDIATION_NOTIFY, f"{where}: {event.kind} ({event.severity}): {event.summary}"
    if decision.outcome == Outcome.REFUSED and decision.reason.startswith(CAP_REACHED):
        return EventType.REMEDIATION_ESCALATED, f"{decision.policy.name}: {decision.reason}"
    if decision.escalated and decision.outcome in (Outcome.ACTED, Outcome.DEFERRED):  # its drain later: the same key
        return EventType.REMEDIATION_ESCALATED, (
            f"{where}: {decision.kind} back after {decision.policy.action}: escalated to {decision.action}"
            f"{' and a repair' if decision.opens_repair else ''} (attempt {decision.attempt})"
        )
    return None


def _breaker_trips(refused: list[RemediationDecision]):
    """One event per trip of the circuit breaker, however many nodes it left in service: refusals less than the
    breaker's window apart are one trip, keyed by its first refusal, so a later scan of the same trip sends nothing.
    The title names the leaf switch the refusals name (apps/remediation/fabric.py: every node behind it)."""
    trips: list[tuple[RemediationDecision, list[RemediationDecision]]] = []
    for decision in refused:
        window = timedelta(minutes=decision.policy.breaker_window_minutes)
        if trips and decision.decided_at - trips[-1][1][-1].decided_at <= window:
            trips[-1][1].append(decision)
        else:
            trips.append((_trip_start(decision), [decision]))
    for start, decisions in trips:
        nodes = sorted({d.node.hostname for d in decisions if d.node})
        leaves = sorted({match["leaf"] for d in decisions if (match := SUSPECT_LEAF.search(d.reason))})
        cause = f"; all behind leaf switch {' / '.join(leaves)}: suspect the switch" if leaves else ""
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        yield {
            "key": f"{EventType.REMEDIATION_BREAKER}:{start.public_id}",
            "event": EventType.REMEDIATION_BREAKER,
            "title": f"Automation stopped at the circuit breaker: {counted(len(nodes), 'node')} left in service "
            f"({shown})"
            f"{cause}; a person decides",
            "payload": {
                "breaker": {
                    "started": start.decided_at.isoformat(),
                    "window_minutes": start.policy.breaker_window_minutes,
                    "leaf_switches": leaves,
                    "nodes": nodes,
                    "reason": decisions[0].reason,
                    "url": _link(reverse("remediation")),
                },
                "decisions": [_decision_data(d) for d in decisions[:50]],
            },
        }


def _trip_start(decision: RemediationDecision) -> RemediationDecision:
    """The first refusal of the trip the decision belongs to: walk back while an earlier breaker refusal ("on")
    lies within the breaker's window."""
    start = decision
    while True:
        window = timedelta(minutes=start.policy.breaker_window_minutes)
        earlier = (
            RemediationDecision.objects.filter(
                mode=Mode.ON,
                outcome=Outcome.REFUSED,
                reason__startswith=BREAKER_TRIPPED,
                decided_at__gte=start.decided_at - window,
            )
            .filter(Q(decided_at__lt=start.decided_at) | Q(decided_at=start.decided_at, pk__lt=start.pk))
            .select_related("policy")
            .order_by("decided_at", "id")
            .first()
        )
        if earlier is None:
            return start
        start = earlier


def _decision_data(decision: RemediationDecision) -> dict:
    event, node = decision.event, decision.node
    return {
        "id": str(decision.public_id),
        "policy": decision.policy.name,
        "mode": decision.mode,
        "action": decision.action,
        "outcome": decision.outcome,
        "escalated": decision.escalated,
        "attempt": decision.attempt,
        "reason": decision.reason,
        "decided_at": decision.decided_at.isoformat(),
        "job_id": str(decision.job_id) if decision.job_id else None,
        "event": {
            "id": str(event.public_id),
            "kind": event.kind,
            "severity": event.severity,
            "component": event.component_label,
            "summary": event.summary,
            "first_seen": event.first_seen.isoformat(),
            "url": _link(reverse("api:healthevent-detail", args=[event.public_id])),
        },
        "node": (
            {
                "hostname": node.hostname,
                "id": str(node.public_id),
                "url": _link(reverse("node-detail", args=[node.public_id])),
            }
            if node
            else None
        ),
        "url": _link(reverse("api:remediationdecision-detail", args=[decision.public_id])),
        "page": _link(reverse("remediation")),
    }


def scan_health(*, now=None) -> int:
    """Fleet health per compute node, compared with what the last scan saw: a node that turns unhealthy is an event.
    Only while a subscription wants it, and at most every RACKPILOT_NOTIFY_HEALTH_SECONDS; the first look at a node
    records it without an event."""
    from apps.monitoring.health import node_health

    now = now or timezone.now()
    wanted = any(EventType.NODE_UNHEALTHY in (s.events or []) for s in Subscription.objects.filter(enabled=True))
    if not wanted:
        return 0
    cursor, first = _cursor("health", now)
    if not first and cursor.at > now - timedelta(seconds=settings.RACKPILOT_NOTIFY_HEALTH_SECONDS):
        return 0
    if not ScanCursor.objects.filter(pk=cursor.pk, at=cursor.at).update(at=now, updated=now) and not first:
        return 0  # another scan took this turn
    verdicts = node_health()
    nodes = dict(Node.objects.filter(hostname__in=[v.hostname for v in verdicts]).values_list("hostname", "pk"))
    states = {state.node_id: state for state in NodeHealthState.objects.filter(node_id__in=nodes.values())}
    recorded = 0
    for verdict in verdicts:
        node_id = nodes.get(verdict.hostname)
        if node_id is None:
            continue
        state = states.get(node_id)
        if state is None:
            NodeHealthState.objects.create(node_id=node_id, healthy=verdict.healthy, reasons=verdict.reasons, since=now)
            continue
        if state.healthy == verdict.healthy:
            if state.reasons != verdict.reasons:
                NodeHealthState.objects.filter(pk=state.pk).update(reasons=verdict.reasons, updated=now)
            continue
        NodeHealthState.objects.filter(pk=state.pk).update(
            healthy=verdict.healthy, reasons=verdict.reasons, since=now, updated=now
        )
        if not verdict.healthy:
            recorded += (
                notify(
                    key=f"node.unhealthy:{node_id}:{now.isoformat()}",
                    event=EventType.NODE_UNHEALTHY,
                    title=f"{verdict.hostname} is unhealthy: {'; '.join(verdict.reasons)[:200]}",
                    payload={"node": {"hostname": verdict.hostname, "healthy": False, "reasons": verdict.reasons}},
                )
                is not None
            )
    return recorded


# --- delivering ------------------------------------------------------------------------------------------------------


def body_of(delivery: Delivery) -> dict:
    notification = delivery.notification
    return {
        "id": str(delivery.public_id),
        "event": notification.event,
        "title": notification.title,
        "occurred": notification.created.isoformat(),
        "data": notification.payload,
    }


def deliver(*, delivery_id: str) -> str:
    """One attempt at a delivery (the task's body). A failed webhook attempt is tried again after
    RACKPILOT_WEBHOOK_RETRY_SECONDS × 2^(attempt-1), up to RACKPILOT_WEBHOOK_MAX_ATTEMPTS attempts; a refused
    address is not retried. Returns the delivery's status."""
    delivery = (
        Delivery.objects.select_related("notification", "subscription", "requested_by")
        .filter(public_id=delivery_id)
        .first()
    )
    if delivery is None or delivery.status not in DELIVERY_OPEN:
        return delivery.status if delivery else "missing"
    now = timezone.now()
    # The claim: one attempt at a time however many copies of the message arrive.
    if not Delivery.objects.filter(pk=delivery.pk, status=delivery.status, attempts=delivery.attempts).update(
        attempts=delivery.attempts + 1, last_attempt=now, updated=now
    ):
        return "claimed elsewhere"
    attempt = delivery.attempts + 1
    subscription = delivery.subscription
    if subscription is None:  # deleted since it was queued: the log keeps the delivery, which goes nowhere
        ok, status, error, refused = False, None, "the subscription was deleted before it was sent", True
    elif subscription.channel == Channel.EMAIL:
        ok, status, error, refused = _send_email(delivery)
    else:
        body = json.dumps(body_of(delivery), sort_keys=True).encode()
        outcome = webhooks.post(
            url=subscription.url,
            body=body,
            headers={"X-Rackpilot-Event": delivery.notification.event, "X-Rackpilot-Delivery": str(delivery.public_id)},
            secret=subscription.secret(),
            timeout=settings.RACKPILOT_WEBHOOK_TIMEOUT_SECONDS,
            allow_private=settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE,
        )
        ok, status, error, refused = outcome.ok, outcome.status, outcome.error, outcome.refused
    fields = {"response_status": status, "error": error[:500], "updated": timezone.now()}
    if ok:
        fields.update(status=DeliveryStatus.DELIVERED, delivered=timezone.now())
    elif refused:
        fields.update(status=DeliveryStatus.REFUSED)
    elif attempt >= settings.RACKPILOT_WEBHOOK_MAX_ATTEMPTS:
        fields.update(status=DeliveryStatus.FAILED)
    else:
        fields.update(status=DeliveryStatus.RETRYING)
    Delivery.objects.filter(pk=delivery.pk).update(**fields)
    if fields["status"] == DeliveryStatus.RETRYING:
        wait = settings.RACKPILOT_WEBHOOK_RETRY_SECONDS * 2 ** (attempt - 1)
        enqueue_delivery(delivery_id, countdown=wait)
    elif delivery.notification.event == EventType.TEST:
        _audit_test_outcome(delivery, fields)
    if not ok:
        logger.warning("delivery %s to %s, attempt %s: %s", delivery_id, delivery.subscription_name, attempt, error)
    return fields["status"]


def _audit_test_outcome(delivery: Delivery, fields: dict) -> None:
    """How a test someone sent ended, in the audit log under their name: delivered, or failed and why."""
    delivered = fields["status"] == DeliveryStatus.DELIVERED
    outcome = {"outcome": [None, DeliveryStatus(fields["status"]).label], "delivery": [None, str(delivery.public_id)]}
    if fields["response_status"]:
        outcome["response_status"] = [None, fields["response_status"]]
    if fields["error"]:
        outcome["error"] = [None, fields["error"]]
    audit.record(
        AuditAction.TEST_DELIVERED if delivered else AuditAction.TEST_FAILED,
        object_type=Subscription._meta.label_lower,
        object_id=str(delivery.subscription_id or ""),
        object_repr=delivery.subscription_name,
        changes=outcome,
        user=delivery.requested_by,
    )


def _send_email(delivery: Delivery) -> tuple[bool, None, str, bool]:
    recipients = delivery.subscription.recipient_list()
    if not recipients:
        return False, None, "the subscription lists no e-mail address", True
    body = body_of(delivery)
    text = "\n".join(
        [
            body["title"],
            "",
            f"Event: {EventType(body['event']).label} ({body['event']})",
            f"When: {body['occurred']}",
            "",
            json.dumps(body["data"], indent=2, sort_keys=True),
        ]
    )
    try:
        send_mail(f"[Rackpilot] {body['title']}"[:200], text, settings.DEFAULT_FROM_EMAIL, recipients)
    except Exception as error:  # SMTP's errors are many; each is a failed attempt, retried as a webhook's is
        return False, None, f"e-mail: {_mail_failure(error)}", False
    return True, None, "", False


def _mail_failure(error: Exception) -> str:
    """Why a mail did not go, in words: "ConnectionRefusedError: [Errno 111] Connection refused" said nothing of
    where, or what to set."""
    server = f"{settings.EMAIL_HOST}:{settings.EMAIL_PORT}"
    if isinstance(error, ConnectionRefusedError):
        return f"no mail server answers at {server} (RACKPILOT_EMAIL_HOST, RACKPILOT_EMAIL_PORT: docs/configuration.md)"
    if isinstance(error, OSError):
        return f"could not reach the mail server at {server}: {error.strerror or error}"
    return f"the mail server at {server} refused it: {error}"


def send_test(*, subscription: Subscription, user) -> Delivery:
    """A test event to one subscription (the page's "Send a test" button), delivered like any other. Audited: who
    sent it to which subscription ("Test sent"), then how it ended ("Test delivered" / "Test failed")."""
    now = timezone.now()
    notification = Notification.objects.create(
        key=f"test:{subscription.public_id}:{now.isoformat()}",
        event=EventType.TEST,
        title=f"Test notification for “{subscription.name}”",
        payload={"test": True},
    )
    requested_by = user if getattr(user, "pk", None) else None
    delivery = Delivery.objects.create(
        notification=notification,
        subscription=subscription,
        subscription_name=subscription.name,
        requested_by=requested_by,
    )
    audit.record(
        AuditAction.TEST,
        obj=subscription,
        changes={"channel": [None, subscription.get_channel_display()], "delivery": [None, str(delivery.public_id)]},
        user=requested_by,
    )
    transaction.on_commit(lambda: enqueue_delivery(str(delivery.public_id)))
    return delivery


# --- subscriptions ---------------------------------------------------------------------------------------------------


def save_subscription(*, subscription: Subscription | None = None, user, secret: str | None = None, **fields):
    """Create or change a subscription. `secret` None keeps the stored one; "" keeps it too (it is never shown, so
    a form left blank means "unchanged"). A webhook needs an http(s) URL whose host is allowed (checked now and at
    every send) and a secret; e-mail needs valid addresses. ValidationError naming the field."""
    from django.core.exceptions import ValidationError as DjangoValidationError
    from django.core.validators import validate_email
    from rest_framework import serializers

    from apps.core.outbound import OutboundRefused

    subscription = subscription or Subscription(owner=user if getattr(user, "is_authenticated", False) else None)
    for key in ("name", "channel", "url", "recipients", "events", "enabled"):
        if key in fields and fields[key] is not None:
            setattr(subscription, key, fields[key])
    errors: dict[str, list[str]] = {}
    if not subscription.name:
        errors["name"] = ["Give the subscription a name."]
    elif Subscription.objects.filter(name=subscription.name).exclude(pk=subscription.pk).exists():
        errors["name"] = ["A subscription with this name exists."]
    events = subscription.events
    subscribable = [value for value, _ in SUBSCRIBABLE_EVENTS]
    if not isinstance(events, list) or not events or any(e not in subscribable for e in events):
        errors["events"] = [f"Choose one or more of: {', '.join(subscribable)}."]
    else:
        subscription.events = [e for e in subscribable if e in events]
    if subscription.channel == Channel.WEBHOOK:
        try:
            webhooks.check_url(subscription.url or "", allow_private=settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE)
        except (ValueError, OutboundRefused, OSError) as error:  # the address rules; a name IDNA cannot encode
            errors["url"] = [str(error)]
        if secret:
            if len(secret) < 16:
                errors["secret"] = ["Use a shared secret of at least 16 characters."]
        elif not subscription.has_secret:
            errors["secret"] = ["A webhook needs a shared secret: the receiver checks each request's signature."]
        subscription.recipients = ""
    elif subscription.channel == Channel.EMAIL:
        addresses = subscription.recipient_list()
        if not addresses:
            errors["recipients"] = ["Give one or more e-mail addresses."]
        for address in addresses:
            try:
                validate_email(address)
            except DjangoValidationError:
                errors.setdefault("recipients", []).append(f"Not an e-mail address: {address}")
        subscription.url, secret = "", None
        subscription.secret_encrypted = ""
    else:
        errors["channel"] = ["webhook or email."]
    if errors:
        raise serializers.ValidationError(errors)
    if secret:
        subscription.set_secret(secret)
    subscription.save()
    return subscription
