from django.db import models


class Timing(models.TextChoices):
    CRONTAB = "crontab", "Crontab"
    INTERVAL = "interval", "Every N minutes"


class RunStatus(models.TextChoices):
    STARTED = "started", "Job started"
    SKIPPED = "skipped", "Skipped"
    ERROR = "error", "Could not start"


RUN_STATUS_COLOURS = {RunStatus.STARTED: "green", RunStatus.SKIPPED: "grey", RunStatus.ERROR: "red"}


class Channel(models.TextChoices):
    WEBHOOK = "webhook", "Webhook"
    EMAIL = "email", "E-mail"


class EventType(models.TextChoices):
    JOB_FAILED = "job.failed", "A job failed or ended in error"
    SUGGESTION_OPENED = "suggestion.opened", "A deployment suggestion opened"
    NODE_DEGRADED = "node.degraded", "A node's status became degraded or failed"
    NODE_UNHEALTHY = "node.unhealthy", "Fleet health calls a node unhealthy"
    DISCOVERY_DRIFT = "discovery.drift", "A discovery found differences from the inventory"
    # Remediation's decisions that need a person (apps/remediation; only "on" ones: shadow is a record, never a page).
    REMEDIATION_NOTIFY = "remediation.notify", "A remediation policy notifies: a health event needs a person"
    REMEDIATION_BREAKER = "remediation.breaker", "Automation stopped at the circuit breaker: a person decides"
    REMEDIATION_ESCALATED = (
        "remediation.escalated",
        "A fault came back after remediation's action: escalated, or stopped at the attempt cap",
    )
    REMEDIATION_FAILED = "remediation.failed", "A remediation action could not start"
    TEST = "notification.test", "A test sent from the notifications page"


# What a subscription can ask for: every event but the test, which goes only to the subscription it tests (a receiver
# that acts on job.failed must not take a test for a failed job).
SUBSCRIBABLE_EVENTS = [(event.value, event.label) for event in EventType if event != EventType.TEST]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RETRYING = "retrying", "Retrying"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"
    REFUSED = "refused", "Refused (address not allowed)"


DELIVERY_OPEN = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)
DELIVERY_STATUS_COLOURS = {
    DeliveryStatus.PENDING: "blue",
    DeliveryStatus.RETRYING: "orange",
    DeliveryStatus.DELIVERED: "green",
    DeliveryStatus.FAILED: "red",
    DeliveryStatus.REFUSED: "red",
}
