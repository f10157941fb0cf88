"""Health events: one row per thing wrong with one component, whichever producer saw it (docs/health.md)."""

from django.conf import settings
from django.db import models
from django.db.models import Case, IntegerField, Q, Value, When

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.health.choices import SEVERITY_COLOURS, SEVERITY_RANK, ClearedBy, ComponentType, Severity, Source

kind_validator_message = "Use a short slug: lower-case letters, digits and dashes or underscores (e.g. xid79)."


class HealthEventQuerySet(models.QuerySet):
    def open(self) -> "HealthEventQuerySet":
        return self.filter(cleared_at__isnull=True)

    def worst_first(self) -> "HealthEventQuerySet":
        """Critical first, then major, minor, info; within a severity the newest seen first."""
        rank = Case(
            *(When(severity=severity, then=Value(value)) for severity, value in SEVERITY_RANK.items()),
            output_field=IntegerField(),
        )
        return self.annotate(severity_rank=rank).order_by("severity_rank", "-last_seen", "-id")


class HealthEvent(AuditedModel, PublicModel):
    """Something wrong with one component (a GPU, NIC, cable, switch port, switch, node, its BMC, a volume, an NVLink
    switch tray), as one
    producer or several saw it. Repeats of the same kind on the same component fold into the one open event (count,
    last seen, evidence); an event is open until a validation or an operator clears it."""

    audit_hidden = ("component_key",)  # the folding key: the audit log names the component by its label

    component_type = models.CharField(max_length=24, choices=ComponentType.choices)
    # The component's identity, e.g. "gpu:12" or "switch_port:3:swp12": one open event per (component_key, kind).
    component_key = models.CharField(max_length=64, db_index=True)
    component_label = models.CharField(max_length=200, help_text="The component's name as it was when recorded.")
    # The node the component is in or attached to; empty only for a switch, its ports, switch-to-switch cables and an
    # NVLink switch tray (it serves every compute tray of its domain: a fault on it is none of theirs).
    node = models.ForeignKey(
        "inventory.Node", null=True, blank=True, on_delete=models.CASCADE, related_name="health_events"
    )
    gpu = models.ForeignKey("inventory.Gpu", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    nic = models.ForeignKey("inventory.Nic", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    cable = models.ForeignKey("inventory.Cable", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    switch = models.ForeignKey("inventory.Switch", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    switch_port = models.CharField(max_length=32, blank=True)
    volume = models.ForeignKey("inventory.Volume", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    nvlink_switch_tray = models.ForeignKey(
        "inventory.NvlinkSwitchTray", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    source = models.CharField(max_length=16, choices=Source.choices, help_text="The producer that saw it first.")
    sources = models.JSONField(default=list, blank=True, help_text="Every producer that has seen it.")
    kind = models.CharField(max_length=48, help_text="What is wrong, as a short slug: xid79, link_degraded, …")
    severity = models.CharField(max_length=16, choices=Severity.choices)
    summary = models.CharField(max_length=300)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    count = models.PositiveIntegerField(default=1, help_text="Distinct observations folded into this event.")
    evidence = models.JSONField(
        default=list, blank=True, help_text="The latest observations: links (job, run, incident) and log lines."
    )

    cleared_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cleared_by = models.CharField(max_length=16, choices=ClearedBy.choices, blank=True)
    cleared_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="cleared_health_events"
    )
    clear_reason = models.CharField(max_length=300, blank=True)
    clear_evidence = models.JSONField(default=dict, blank=True, help_text="The validation that passed, if one did.")

    objects = HealthEventQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["component_key", "kind"],
                condition=Q(cleared_at__isnull=True),
                name="health_event_one_open_per_component_kind",
            ),
            models.CheckConstraint(condition=Q(severity__in=Severity.values), name="health_event_severity_known"),
            models.CheckConstraint(condition=Q(source__in=Source.values), name="health_event_source_known"),
            models.CheckConstraint(
                condition=Q(cleared_at__isnull=True, cleared_by="") | Q(cleared_at__isnull=False) & ~Q(cleared_by=""),
                name="health_event_cleared_says_by_what",
            ),
            models.CheckConstraint(condition=Q(count__gte=1), name="health_event_count_positive"),
        ]
        indexes = [models.Index(fields=["node", "cleared_at"], name="health_event_node_open_idx")]

    def __str__(self) -> str:
        return f"{self.component_label}: {self.kind}"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None

    @property
    def severity_colour(self) -> str:
        return SEVERITY_COLOURS[self.severity]

    @property
    def reason(self) -> str:
        """The event as a node's health reason: "GPU 3: XID 79, GPU fell off the bus (critical, telemetry watch)"."""
        return f"{self.summary} ({self.get_severity_display().lower()}, {self.get_source_display().lower()})"
