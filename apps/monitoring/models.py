"""Monitoring's records: each node's BMC (how to read it) and the readings taken from it, and the business SLOs."""

import hashlib

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.core import secrets
from apps.core.audit import AuditedModel
from apps.core.models import PublicModel, TimestampedModel
from apps.core.validators import name_validator
from apps.inventory.models import Node, NvlinkSwitchTray, Site
from apps.jobs.models import Job
from apps.monitoring import slo
from apps.monitoring.choices import (
    DEFAULT_PORTS,
    POLL_RESULT_COLOURS,
    VALIDATION_OUTCOME_COLOURS,
    BmcProtocol,
    PollResult,
    SensorKind,
    ValidationOutcome,
)
from apps.monitoring.slo import Objective, ScopeKind
from apps.workloads.models import InferenceService


class Bmc(AuditedModel, PublicModel):
    """How Rackpilot reads one BMC: protocol, port, login, TLS; and how its last read went. A BMC belongs to one
    node (a server, a compute tray) or to one NVLink switch tray of a rack-scale system (its leak detectors and
    temperatures), never both (a constraint).

    The address is its owner's own `bmc_address` (one home for it, in the inventory). The password is stored
    encrypted (apps/core/secrets.py) and never shown back, logged or audited. `polls_*` count every read so far:
    durable facts that /metrics turns into counters which survive worker restarts.
    """

    node = models.OneToOneField(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="bmc")
    switch_tray = models.OneToOneField(
        NvlinkSwitchTray, null=True, blank=True, on_delete=models.CASCADE, related_name="bmc"
    )
    protocol = models.CharField(max_length=8, choices=BmcProtocol.choices, default=BmcProtocol.IPMI)
    port = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text="Empty: 623 for IPMI, 443 for Redfish.",
    )
    user = models.CharField(max_length=64, help_text="The BMC account Rackpilot logs in with.")
    password_encrypted = models.TextField(blank=True, editable=False)
    verify_tls = models.BooleanField(
        default=True, help_text="Redfish: check the BMC's certificate (off only for BMCs with self-signed ones)."
    )
    last_polled = models.DateTimeField(null=True, blank=True)
    last_result = models.CharField(max_length=16, choices=PollResult.choices, blank=True)
    last_message = models.CharField(max_length=300, blank=True)
    polls_ok = models.PositiveBigIntegerField(default=0)
    polls_partial = models.PositiveBigIntegerField(default=0)
    polls_failed = models.PositiveBigIntegerField(default=0)
    # The event log's high-water mark: the newest SEL record read ({"record_id", "timestamp"}), so that a record is
    # turned into a health event once (apps/monitoring/bmc/sel.py).
    sel_mark = models.JSONField(default=dict, blank=True, editable=False)
    sel_read = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["node__hostname", "switch_tray__name"]
        verbose_name = "BMC"
        constraints = [
            models.CheckConstraint(
                condition=Q(port__isnull=True) | Q(port__gte=1, port__lte=65535), name="bmc_port_range"
            ),
            models.CheckConstraint(
                condition=Q(node__isnull=False, switch_tray__isnull=True)
                | Q(node__isnull=True, switch_tray__isnull=False),
                name="bmc_of_one_owner",
                violation_error_message="A BMC belongs to one node or one NVLink switch tray.",
            ),
        ]

    def __str__(self) -> str:
        return f"BMC of {self.owner_name}"

    @property
    def owner(self) -> "Node | NvlinkSwitchTray":
        """The node or switch tray whose BMC this is."""
        return self.node if self.node_id else self.switch_tray

    @property
    def owner_name(self) -> str:
        """How pages, errors and the poll name it: the node's host name, the switch tray's name."""
        return self.node.hostname if self.node_id else self.switch_tray.name

    @property
    def address(self) -> str:
        return self.owner.bmc_address

    @property
    def effective_port(self) -> int:
        return self.port or DEFAULT_PORTS[self.protocol]

    @property
    def has_password(self) -> bool:
        return bool(self.password_encrypted)

    @property
    def last_result_colour(self) -> str:
        return POLL_RESULT_COLOURS.get(self.last_result, "grey")

    def set_password(self, plaintext: str) -> None:
        self.password_encrypted = secrets.encrypt(plaintext) if plaintext else ""

    def password(self) -> str:
        return secrets.decrypt(self.password_encrypted) if self.password_encrypted else ""

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        loaded = getattr(instance, "_audit_loaded", None)
        if loaded is not None and "password_encrypted" in loaded:
            loaded["password_encrypted"] = _audit_marker(loaded["password_encrypted"])
        return instance

    def audit_values(self) -> dict:
        # The audit log says that the password was set or changed; it never holds it, nor its ciphertext.
        values = super().audit_values()
        values["password_encrypted"] = _audit_marker(values["password_encrypted"])
        return values


def _audit_marker(token: str) -> str:
    return f"set #{hashlib.sha256(token.encode()).hexdigest()[:8]}" if token else "not set"


class BmcReadingQuerySet(models.QuerySet):
    def latest_per_sensor(self, owner: "Node | NvlinkSwitchTray") -> list["BmcReading"]:
        """The readings of a node's (or an NVLink switch tray's) most recent poll (every sensor a poll reads shares
        the poll's time)."""
        mine = self.filter(switch_tray=owner) if isinstance(owner, NvlinkSwitchTray) else self.filter(node=owner)
        newest = mine.order_by("-time").values_list("time", flat=True).first()
        if newest is None:
            return []
        return list(mine.filter(time=newest).order_by("kind", "sensor"))


class BmcReading(models.Model):
    """One sensor's value at one poll: a point of a (node, sensor) series, or of an NVLink switch tray's (its BMC's
    leak detectors and temperatures). Compact on purpose (no public id, no audit): a 32-node fleet read every minute
    writes ~1.5 million of these a day; old ones are pruned after RACKPILOT_BMC_RETENTION_DAYS."""

    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="bmc_readings")
    switch_tray = models.ForeignKey(
        NvlinkSwitchTray, null=True, blank=True, on_delete=models.CASCADE, related_name="bmc_readings"
    )
    time = models.DateTimeField()
    kind = models.CharField(max_length=12, choices=SensorKind.choices)
    sensor = models.CharField(max_length=64, help_text="The BMC's own sensor name, e.g. 'Inlet Temp'.")
    unit = models.CharField(max_length=8, help_text="C, RPM, %, W.")
    value = models.FloatField()

    objects = BmcReadingQuerySet.as_manager()

    class Meta:
        ordering = ["node", "sensor", "time"]
        indexes = [
            models.Index(fields=["node", "sensor", "time"], name="bmcreading_series_idx"),
            models.Index(fields=["node", "time"], name="bmcreading_node_time_idx"),
            models.Index(fields=["time"], name="bmcreading_time_idx"),  # pruning
            # A switch tray's series: few rows beside the nodes', so only they are indexed.
            models.Index(
                fields=["switch_tray", "time"],
                name="bmcreading_switch_tray_idx",
                condition=Q(switch_tray__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(node__isnull=False, switch_tray__isnull=True)
                | Q(node__isnull=True, switch_tray__isnull=False),
                name="bmcreading_of_one_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sensor} {self.value:g} {self.unit}"


class RecordedSampleQuerySet(models.QuerySet):
    def of(self, series: str, labels: str = "") -> "RecordedSampleQuerySet":
        return self.filter(series=series, labels=labels)


class RecordedSample(models.Model):
    """One sample of a recorded telemetry series, as a Prometheus recording rule writes one: the embedded wiring's
    record of what the pages and SLOs read (apps.monitoring.recorder). Append-only: a sample is written once, at the
    time it stands for, with the cluster as it was when it was recorded (a fault cleared later changes the samples
    recorded after, never these); pruned past RECORDED_RETENTION_DAYS. Compact on purpose, like BmcReading."""

    series = models.CharField(max_length=120, help_text="The recording rule's name, e.g. rackpilot:gpu_util:avg.")
    labels = models.CharField(
        max_length=200, blank=True, default="", help_text="The sample's labels as 'name=value,...' (sorted); '' none."
    )
    time = models.BigIntegerField(help_text="Unix seconds, on the rule's interval (a multiple of 60 or 300).")
    value = models.FloatField()
    created = models.DateTimeField(auto_now_add=True, help_text="When it was recorded (a backfill records the past).")

    objects = RecordedSampleQuerySet.as_manager()

    class Meta:
        ordering = ["series", "labels", "time"]
        constraints = [
            models.UniqueConstraint(fields=["series", "labels", "time"], name="monitoring_recordedsample_once"),
        ]
        indexes = [models.Index(fields=["time"], name="recordedsample_time_idx")]  # pruning

    def __str__(self) -> str:
        return f"{self.series}{{{self.labels}}} @{self.time} = {self.value:g}"


class BmcSchedule(TimestampedModel):
    """How often the BMCs of one site are read; a site without one uses RACKPILOT_BMC_POLL_SECONDS."""

    site = models.OneToOneField(Site, on_delete=models.CASCADE, related_name="bmc_schedule")
    interval_seconds = models.PositiveIntegerField(
        validators=[MinValueValidator(10), MaxValueValidator(86400)], help_text="Seconds between two reads."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["site__name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(interval_seconds__gte=10, interval_seconds__lte=86400), name="bmcschedule_interval_range"
            ),
        ]

    def __str__(self) -> str:
        return f"BMC reads of {self.site} every {self.interval_seconds} s"


class KernelLogMark(TimestampedModel):
    """How far a node's kernel log has been read: the time stamp of the newest line the last `kernel-log` read saw.
    The next read turns only the lines after it into health events (apps/monitoring/kernel_log.py)."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="kernel_log_mark")
    read_until = models.DateTimeField()

    class Meta:
        ordering = ["node__hostname"]

    def __str__(self) -> str:
        return f"{self.node} kernel log read until {self.read_until:%Y-%m-%d %H:%M:%S}"


class Slo(AuditedModel, PublicModel):
    """A business SLO as data: an objective (apps/monitoring/slo.py), its scope, its target and the share of
    evaluation steps that must meet it."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    objective = models.CharField(max_length=24, choices=Objective.choices)
    scope = models.CharField(max_length=16, choices=ScopeKind.choices)
    service = models.ForeignKey(
        "workloads.InferenceService", null=True, blank=True, on_delete=models.CASCADE, related_name="slos"
    )
    training_job = models.ForeignKey(
        "workloads.TrainingJob", null=True, blank=True, on_delete=models.CASCADE, related_name="slos"
    )
    rack = models.ForeignKey("inventory.Rack", null=True, blank=True, on_delete=models.CASCADE, related_name="slos")
    target = models.FloatField(help_text="In the objective's unit: % of design, ms, kWh per million tokens, %.")
    compliance = models.FloatField(
        default=0.99,
        validators=[MinValueValidator(0.5), MaxValueValidator(0.9999)],
        help_text="Share of evaluation steps that must meet the target (0.99: a 1 % error budget).",
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "SLO"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        criterion = slo.CRITERIA.get(self.objective)
        if criterion is None:
            return  # the choices field reports it
        if self.scope not in criterion.scopes:
            allowed = ", ".join(sorted(ScopeKind(s).label.lower() for s in criterion.scopes))
            errors["scope"] = f"{criterion.label} is measured for: {allowed}."
        low, high = criterion.bounds
        if self.target is not None and not low <= self.target <= high:
            errors["target"] = f"{criterion.label}: a target between {low:g} and {high:g} {criterion.unit}."
        needs = {ScopeKind.SERVICE: "service", ScopeKind.TRAINING_JOB: "training_job", ScopeKind.RACK: "rack"}
        for scope, field in needs.items():
            given = getattr(self, f"{field}_id") is not None
            if self.scope == scope and not given:
                errors[field] = f"Name the {ScopeKind(scope).label.lower()} this SLO is about."
            elif self.scope != scope and given:
                errors[field] = f"Only an SLO on a {ScopeKind(scope).label.lower()} names one."
        if errors:
            raise ValidationError(errors)

    @property
    def target_text(self) -> str:
        """The target as the SLOs page reads it: "≤ 100 ms, 99 % of the time" (it read "100 · 0.9900")."""
        criterion = slo.CRITERIA.get(self.objective)
        if criterion is None or self.target is None or self.compliance is None:
            return "—"
        bound = "≥" if criterion.at_least else "≤"
        return f"{bound} {self.target:g} {criterion.unit}, {100 * self.compliance:g} % of the time"

    def spec(self, *, hosts: bool = True) -> slo.SloSpec:
        """What the rules and the judges need; without its nodes (no query) where only recorded verdicts are
        counted."""
        return slo.SloSpec(
            name=self.name,
            objective=self.objective,
            target=self.target,
            compliance=self.compliance,
            hosts=tuple(self.hostnames()) if hosts else (),
            service=self.service.name if self.service_id else "",
            design_tokens_per_second=float(self.service.design_tokens_per_second) if self.service_id else 0.0,
        )

    def hostnames(self) -> list[str]:
        if self.scope == ScopeKind.SERVICE:
            nodes = self.service.nodes.all()
        elif self.scope == ScopeKind.TRAINING_JOB:
            nodes = self.training_job.nodes.all()
        elif self.scope == ScopeKind.RACK:
            nodes = self.rack.nodes.all()
        else:
            nodes = Node.objects.filter(gpus__isnull=False).distinct()
        return sorted(nodes.values_list("hostname", flat=True))


class BusinessValidation(PublicModel):
    """One business validation run of an inference service (the `business-validation` job kind): the load profile,
    what it measured, and its verdict against the brief's four criteria, each with its criterion and evidence.

    Written once, by the job's hooks, when the load test ends; pages, the API and acceptance reports only read it."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="business_validation")
    service = models.ForeignKey(InferenceService, on_delete=models.CASCADE, related_name="business_validations")
    endpoint = models.CharField(max_length=255, help_text="The OpenAI-compatible base URL the load test called.")
    outcome = models.CharField(max_length=16, choices=ValidationOutcome.choices)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    profile = models.JSONField(default=dict, help_text="Concurrency, requests, prompt and output tokens, API.")
    figures = models.JSONField(default=dict, help_text="What the run measured (tokens/s, latencies, energy).")
    verdicts = models.JSONField(default=list, help_text="One per criterion: criterion, value, outcome, evidence.")
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=ValidationOutcome.values), name="businessvalidation_outcome_known"
            ),
        ]

    def __str__(self) -> str:
        return f"business validation of {self.service.name}: {self.outcome}"

    @property
    def outcome_colour(self) -> str:
        return VALIDATION_OUTCOME_COLOURS[self.outcome]


class SloBlame(models.Model):
    """What drags an SLO over one of its windows (the nodes ranked_draggers ranks, with their GPUs' figures), worked
    out by the embedded wiring's minute run for the window as it ends at `time` (on the window's step grid), so that the
    SLOs page reads it instead of working it out per view (apps.monitoring.services.record_slo_blame). Append-only;
    pruned after a day (a view reads the newest). The nodes' incidents and failing tests are joined when read."""

    slo = models.ForeignKey(Slo, on_delete=models.CASCADE, related_name="blames")
    window = models.CharField(max_length=8, help_text="The window's name: 1h, 24h, 7d or 30d.")
    time = models.BigIntegerField(help_text="Unix seconds: the window's end, on its step grid.")
    draggers = models.JSONField(help_text="Per node, most drag first: hostname, its means, drag and two GPUs.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slo", "window", "-time"]
        constraints = [models.UniqueConstraint(fields=["slo", "window", "time"], name="monitoring_sloblame_once")]
        indexes = [models.Index(fields=["time"], name="sloblame_time_idx")]  # pruning

    def __str__(self) -> str:
        return f"blame of {self.slo_id} over {self.window} @{self.time}"
