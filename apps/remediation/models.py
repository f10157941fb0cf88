"""Remediation as data: per health-event kind a policy (what to do, shadow or on, within which limits) and, per
(event, policy, mode), the decision the evaluator took (docs/health.md, "Remediation")."""

from fnmatch import fnmatchcase

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.health.choices import SEVERITY_RANK, Severity
from apps.remediation.choices import (
    REPAIR_ACTIVE,
    REPAIR_COLOURS,
    Action,
    GateKind,
    GateState,
    Mode,
    Outcome,
    PartType,
    RepairState,
)


class RemediationPolicy(AuditedModel, PublicModel):
    """What automation does about open health events of a kind (a glob such as `xid*`) at or above a severity."""

    name = models.CharField(max_length=100, unique=True)
    kind_pattern = models.CharField(
        max_length=48, help_text="The event kind it matches: a slug, or a glob such as xid* or ecc_*."
    )
    min_severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.MAJOR)
    action = models.CharField(max_length=16, choices=Action.choices)
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.SHADOW)
    enabled = models.BooleanField(default=True)
    # The circuit breaker: automation takes at most this many nodes, or this share of the fleet, out of service in
    # any window of this many minutes; past it, it stops and a person decides.
    breaker_max_nodes = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    breaker_max_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=5,
        validators=[MinValueValidator(0.01), MaxValueValidator(100)],
        help_text="Percent of the compute fleet, above 0 and at most 100.",
    )
    breaker_window_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    # After this many actions on one node for one kind, a fault back escalates (reboot → quarantine and repair).
    max_attempts = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    # The rollout: "on" with canary racks acts on their nodes only and stays in shadow on the rest of the fleet.
    canary_racks = models.ManyToManyField(
        "inventory.Rack",
        blank=True,
        related_name="+",
        help_text="On: act only on these racks' nodes (shadow elsewhere); none: on the whole fleet.",
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "remediation policies"
        constraints = [
            models.CheckConstraint(condition=Q(breaker_max_nodes__gte=1), name="remediation_breaker_nodes_positive"),
            models.CheckConstraint(
                condition=Q(breaker_max_percent__gt=0, breaker_max_percent__lte=100),
                name="remediation_breaker_percent_range",
            ),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="remediation_attempts_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def stage(self) -> str:
        """Where its rollout stands: shadow, canary (on for its canary racks) or fleet (on everywhere)."""
        if self.mode == Mode.SHADOW:
            return "shadow"
        return "canary" if self.pk and self.canary_racks.all() else "fleet"

    def mode_for(self, node) -> str:
        """Its mode on a node: "on" only on its canary racks while it has some; shadow elsewhere."""
        if self.mode != Mode.ON or not self.pk:
            return self.mode
        racks = {rack.pk for rack in self.canary_racks.all()}
        return Mode.ON if not racks or (node is not None and node.rack_id in racks) else Mode.SHADOW

    def matches(self, event) -> bool:
        return (
            fnmatchcase(event.kind, self.kind_pattern)
            and SEVERITY_RANK[event.severity] <= SEVERITY_RANK[self.min_severity]
        )


class RemediationDecision(AuditedModel, PublicModel):
    """What one policy did about one open event or, in shadow, would have done; a refusal says why."""

    event = models.ForeignKey("health.HealthEvent", on_delete=models.CASCADE, related_name="remediation_decisions")
    policy = models.ForeignKey(RemediationPolicy, on_delete=models.CASCADE, related_name="decisions")
    node = models.ForeignKey(
        "inventory.Node", null=True, blank=True, on_delete=models.CASCADE, related_name="remediation_decisions"
    )
    kind = models.CharField(max_length=48, help_text="The event's kind, kept for the attempt count.")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    action = models.CharField(max_length=16, choices=Action.choices, help_text="The action taken or meant.")
    escalated = models.BooleanField(default=False, help_text="A fault back after an earlier action on the node.")
    attempt = models.PositiveIntegerField(default=1)
    opens_repair = models.BooleanField(default=False)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    reason = models.CharField(max_length=500)
    job_id = models.UUIDField(null=True, blank=True, help_text="The scheduler job it started, if any.")
    decided_at = models.DateTimeField(db_index=True)
    # Checkpoint-aware quarantine (docs/health.md): the training job the node was under, the deadline of the wait for
    # its next checkpoint, and the facts of the drain: where the job stood when it was decided and drained, the
    # checkpoint it resumes from, the steps run since that checkpoint (lost) and the GPUs that lost them.
    training_job = models.ForeignKey(
        "workloads.TrainingJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="quarantines"
    )
    drain_by = models.DateTimeField(null=True, blank=True, help_text="Drained then at the latest, checkpoint or not.")
    checkpoint_before = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The job's newest saved checkpoint when it was decided."
    )
    decided_step = models.PositiveBigIntegerField(null=True, blank=True, help_text="The job's step when decided.")
    drained_at = models.DateTimeField(null=True, blank=True)
    drained_step = models.PositiveBigIntegerField(null=True, blank=True, help_text="The job's step when drained.")
    checkpoint_step = models.PositiveBigIntegerField(null=True, blank=True, help_text="The step it resumes from.")
    steps_lost = models.PositiveBigIntegerField(null=True, blank=True, help_text="Drained step − checkpoint step.")
    gpus = models.PositiveIntegerField(null=True, blank=True, help_text="The job's GPUs (its world size).")
    seconds_per_step = models.FloatField(null=True, blank=True, help_text="The job's step time when drained.")
    resume_incident = models.UUIDField(
        null=True, blank=True, help_text="The incident (runbook 3) that resumes the job around the node."
    )
    # Deferred into a maintenance window (docs/health.md): the window, and when the action runs (its start). `act_at`
    # stays when the window is deleted, so the evaluator knows to decide the action again.
    window = models.ForeignKey(
        "remediation.MaintenanceWindow",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deferred_decisions",
    )
    act_at = models.DateTimeField(
        null=True, blank=True, help_text="Deferred into a maintenance window: the action runs when it opens."
    )

    class Meta:
        ordering = ["-decided_at", "-id"]
        constraints = [
            # Never twice for the same event: one decision per (event, policy) in each mode. A policy turned on (or
            # its canary grown) decides again, for real, the open events it decided only in shadow.
            models.UniqueConstraint(
                fields=["event", "policy", "mode"], name="remediation_one_decision_per_event_policy_mode"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.policy}: {self.get_outcome_display()} {self.action} on {self.event}"


class MaintenanceWindow(AuditedModel, PublicModel):
    """People are working on a rack or a node from `starts` to `ends`: automation leaves its nodes to them."""

    rack = models.ForeignKey("inventory.Rack", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey("inventory.Node", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    starts = models.DateTimeField()
    ends = models.DateTimeField()
    reason = models.CharField(max_length=200)

    class Meta:
        ordering = ["starts", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rack__isnull=False, node__isnull=True) | Q(rack__isnull=True, node__isnull=False),
                name="remediation_window_on_a_rack_or_a_node",
            ),
            models.CheckConstraint(condition=Q(ends__gt=models.F("starts")), name="remediation_window_ends_after"),
        ]

    def __str__(self) -> str:
        return f"{self.node or self.rack}: {self.reason}"


class Repair(AuditedModel, PublicModel):
    """A node out of service for a fault, from its quarantine to its return: the evidence captured before any reboot,
    the parts replaced, and the validation chosen by the fault that must pass before the scheduler takes it back.
    One active repair per node: a second quarantine of the node joins it."""

    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="repairs")
    state = models.CharField(max_length=20, choices=RepairState.choices, default=RepairState.OPEN)
    events = models.ManyToManyField("health.HealthEvent", blank=True, related_name="repairs")
    decisions = models.ManyToManyField(RemediationDecision, blank=True, related_name="repairs")
    reason = models.CharField(max_length=300, help_text="Why it was opened: the first event or the operator's words.")
    # Chosen from the events as they join (until then, and for no named fault, the whole acceptance).
    gate_kind = models.CharField(max_length=16, choices=GateKind.choices, default=GateKind.ACCEPTANCE)
    gate_parameters = models.JSONField(default=dict, blank=True)
    gate_reason = models.CharField(max_length=300, blank=True, help_text="Why this validation: the kinds it matched.")
    # The evidence packet, captured before any reboot or power-cycle: {"bug_report", "kernel_log", "bmc_log",
    # "findings"}, each with what was read or why it could not be.
    evidence = models.JSONField(default=dict, blank=True)
    evidence_job_id = models.UUIDField(null=True, blank=True)
    evidence_captured_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(db_index=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resume_job_id = models.UUIDField(null=True, blank=True, help_text="The scheduler-action job that resumed it.")
    # The inventory's drain that the return lifted ({"since", "reason", "until"}): put back when the scheduler does
    # not resume the node, as the scheduler still holds it drained.
    drain_before_return = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=Q(state__in=REPAIR_ACTIVE), name="remediation_one_active_repair_per_node"
            ),
            models.CheckConstraint(condition=Q(state__in=RepairState.values), name="remediation_repair_state_known"),
            models.CheckConstraint(
                condition=Q(state__in=REPAIR_ACTIVE, closed_at__isnull=True)
                | ~Q(state__in=REPAIR_ACTIVE) & Q(closed_at__isnull=False),
                name="remediation_repair_closed_when_over",
            ),
        ]

    def __str__(self) -> str:
        return f"repair of {self.node} ({self.get_state_display()})"

    @property
    def is_active(self) -> bool:
        return self.state in REPAIR_ACTIVE

    @property
    def colour(self) -> str:
        return REPAIR_COLOURS[RepairState(self.state)]


class RepairGate(AuditedModel, PublicModel):
    """One try of a repair's validation: the benchmark runs it started and, once they ended, passed or failed."""

    repair = models.ForeignKey(Repair, on_delete=models.CASCADE, related_name="gates")
    kind = models.CharField(max_length=16, choices=GateKind.choices)
    parameters = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=GateState.choices, default=GateState.RUNNING)
    runs = models.ManyToManyField("benchmarks.BenchmarkRun", blank=True, related_name="+")
    summary = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField()
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # One validation at a time per repair.
            models.UniqueConstraint(
                fields=["repair"], condition=Q(state="running"), name="remediation_one_running_gate_per_repair"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display().split(':')[0]} gate of {self.repair}: {self.get_state_display()}"


class PartReplacement(AuditedModel, PublicModel):
    """A part swapped during a repair, by serial: the serial's history follows it across nodes (part_history)."""

    repair = models.ForeignKey(Repair, on_delete=models.PROTECT, related_name="parts")
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="part_replacements")
    component_type = models.CharField(max_length=8, choices=PartType.choices)
    gpu = models.ForeignKey("inventory.Gpu", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    component_label = models.CharField(max_length=200, help_text="The slot as named then: GPU 3, NIC ib0, PSU 2.")
    old_serial = models.CharField(max_length=64, blank=True, db_index=True)
    new_serial = models.CharField(max_length=64, db_index=True)
    replaced_at = models.DateTimeField()
    replaced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["replaced_at", "id"]
        constraints = [
            models.CheckConstraint(condition=~Q(new_serial=""), name="remediation_part_new_serial_given"),
            models.CheckConstraint(condition=~Q(old_serial=F("new_serial")), name="remediation_part_serial_changes"),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.component_label} {self.old_serial or '?'} → {self.new_serial}"
