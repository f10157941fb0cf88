"""Automation: job templates (a kind with saved parameters and targets), their schedules (kept in django-celery-beat's
tables), the runs they made, and notifications (subscriptions, the events that happened, and each delivery)."""

import hashlib

from django.conf import settings
from django.db import models

from apps.automation.choices import (
    DELIVERY_STATUS_COLOURS,
    RUN_STATUS_COLOURS,
    Channel,
    DeliveryStatus,
    EventType,
    RunStatus,
    Timing,
)
from apps.core import secrets
from apps.core.audit import AuditedModel
from apps.core.models import PublicModel, TimestampedModel


class JobTemplateQuerySet(models.QuerySet):
    def visible_to(self, user) -> "JobTemplateQuerySet":
        return self if user is not None and user.is_authenticated else self.none()


class JobTemplate(AuditedModel, PublicModel):
    """A job kind with saved parameters (validated by the kind) and targets, started by hand or by a schedule."""

    name = models.CharField(max_length=100, help_text="Unique, e.g. “nightly discovery”.")
    description = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=64, help_text="A registered job kind.")
    parameters = models.JSONField(default=dict, blank=True, help_text="Validated by the kind's parameter schema.")
    targets = models.JSONField(default=dict, blank=True, help_text="nodes, racks, tags (names or ids) and role.")
    transport = models.CharField(max_length=16, blank=True, help_text="Blank: the kind's or the install's default.")
    only_idle = models.BooleanField(
        default=False, help_text="Leave out the nodes a running or queued job is using when the template starts."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="job_templates"
    )

    objects = JobTemplateQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["name"], name="jobtemplate_unique_name")]

    def __str__(self) -> str:
        return self.name


class Schedule(AuditedModel, PublicModel):
    """When a template runs: a crontab or an interval, mirrored into django-celery-beat's PeriodicTask so that beat
    (with its DatabaseScheduler) sends it. Each tick is claimed once in the database (services.run_schedule_tick)."""

    name = models.CharField(max_length=100)
    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="schedules")
    timing = models.CharField(max_length=16, choices=Timing.choices, default=Timing.CRONTAB)
    minute = models.CharField(max_length=60, default="0", help_text="Crontab minute field.")
    hour = models.CharField(max_length=60, default="2", help_text="Crontab hour field.")
    day_of_month = models.CharField(max_length=60, default="*", help_text="Crontab day-of-month field.")
    month_of_year = models.CharField(max_length=60, default="*", help_text="Crontab month field.")
    day_of_week = models.CharField(max_length=60, default="*", help_text="Crontab day-of-week field (0 = Sunday).")
    every_minutes = models.PositiveIntegerField(null=True, blank=True, help_text="With an interval: every N minutes.")
    enabled = models.BooleanField(default=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Bookkeeping written by conditional updates (no audit entry per tick): the last tick claimed, when it ran.
    last_tick = models.DateTimeField(null=True, blank=True, editable=False)
    last_run_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["name"], name="schedule_unique_name")]

    def __str__(self) -> str:
        return self.name

    def audit_values(self) -> dict:
        values = super().audit_values()
        for name in ("last_tick", "last_run_at", "periodic_task_id"):
            values.pop(name, None)
        return values

    @property
    def crontab_text(self) -> str:
        return " ".join([self.minute, self.hour, self.day_of_month, self.month_of_year, self.day_of_week])

    @property
    def timing_text(self) -> str:
        if self.timing == Timing.INTERVAL:
            return f"every {self.every_minutes} min"
        return f"cron {self.crontab_text} ({settings.TIME_ZONE})"


class TemplateRun(TimestampedModel):
    """A template's start: by hand (schedule empty) or a schedule's tick (unique per schedule and tick: the claim
    that makes a tick run once however many beat processes sent it)."""

    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="runs")
    schedule = models.ForeignKey(Schedule, null=True, blank=True, on_delete=models.CASCADE, related_name="runs")
    tick = models.DateTimeField(null=True, blank=True, help_text="The schedule's time this run is for.")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="template_runs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="template_runs"
    )
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.STARTED)
    message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["schedule", "tick"], name="templaterun_unique_tick")]

    def __str__(self) -> str:
        return f"{self.template} {self.tick or self.created}"

    @property
    def colour(self) -> str:
        return RUN_STATUS_COLOURS[RunStatus(self.status)]


class Subscription(AuditedModel, PublicModel):
    """Who hears of which events: a webhook (JSON, HMAC-SHA256 signed with a shared secret kept encrypted) or
    e-mail to a list of addresses."""

    name = models.CharField(max_length=100)
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.WEBHOOK)
    url = models.URLField(max_length=500, blank=True, help_text="Webhook: where the JSON is POSTed.")
    secret_encrypted = models.TextField(blank=True, editable=False, help_text="Fernet token (apps/core/secrets.py).")
    recipients = models.TextField(blank=True, help_text="E-mail: addresses, one per line or comma-separated.")
    events = models.JSONField(default=list, blank=True, help_text="Event types this subscription receives.")
    enabled = models.BooleanField(default=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="subscriptions"
    )

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["name"], name="subscription_unique_name")]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        loaded = getattr(instance, "_audit_loaded", None)
        if loaded is not None and "secret_encrypted" in loaded:
            loaded["secret_encrypted"] = _audit_marker(loaded["secret_encrypted"])
        return instance

    def audit_values(self) -> dict:
        # The audit log says that the secret was set or changed; it never holds it, nor its ciphertext.
        values = super().audit_values()
        values["secret_encrypted"] = _audit_marker(values["secret_encrypted"])
        return values

    def set_secret(self, plaintext: str) -> None:
        self.secret_encrypted = secrets.encrypt(plaintext) if plaintext else ""

    def secret(self) -> str:
        return secrets.decrypt(self.secret_encrypted) if self.secret_encrypted else ""

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    def recipient_list(self) -> list[str]:
        return [part.strip() for part in self.recipients.replace("\n", ",").split(",") if part.strip()]

    def event_labels(self) -> list[str]:
        return [str(EventType(event).label) for event in self.events if event in EventType.values]


def _audit_marker(token: str) -> str:
    return f"set #{hashlib.sha256(token.encode()).hexdigest()[:8]}" if token else "not set"


class Notification(PublicModel):
    """Something that happened that subscriptions may hear of; `key` names it once (a job's failure, a node's status
    change), so a scan that sees it twice, or two scans at once, record it once."""

    key = models.CharField(max_length=200)
    event = models.CharField(max_length=32, choices=EventType.choices)
    title = models.CharField(max_length=300)
    payload = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["key"], name="notification_unique_key")]

    def __str__(self) -> str:
        return self.title


class Delivery(PublicModel):
    """One notification to one subscription: its attempts and how the last one went (the delivery log). The log
    outlives the subscription: deleting one leaves its deliveries, under the name it had when they were sent."""

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    subscription_name = models.CharField(max_length=100, help_text="The subscription's name when this was sent.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who asked for it (a test); none for an event's delivery.",
    )
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt = models.DateTimeField(null=True, blank=True)
    delivered = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The receiver's HTTP status.")
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["notification", "subscription"], name="delivery_unique_target")]
        indexes = [models.Index(fields=["status", "updated"], name="delivery_status_idx")]

    def __str__(self) -> str:
        return f"{self.notification} → {self.subscription_name}"

    @property
    def colour(self) -> str:
        return DELIVERY_STATUS_COLOURS[DeliveryStatus(self.status)]


class NodeHealthState(TimestampedModel):
    """The last fleet-health verdict seen for a node by the notification scan, to tell a change from a repeat."""

    node = models.OneToOneField("inventory.Node", on_delete=models.CASCADE, related_name="+")
    healthy = models.BooleanField(default=True)
    reasons = models.JSONField(default=list, blank=True)
    since = models.DateTimeField()

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return f"{self.node_id} {'healthy' if self.healthy else 'unhealthy'}"


class ScanCursor(TimestampedModel):
    """Up to when the notification scan has looked (it looks back a little further each time: keys deduplicate)."""

    name = models.CharField(max_length=32)
    at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["name"], name="scancursor_unique_name")]

    def __str__(self) -> str:
        return f"{self.name} {self.at}"
