"""Cost and energy policies' records: the policies (what they watch, where, with whose approval) and what each
proposed and did.

The tables keep the names they had when the policies lived in apps/monitoring (`db_table`): the move changed where
the code lives, not the data (migrations/0001_initial.py)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from apps.core.audit import AuditedModel
from apps.core.models import PublicModel
from apps.core.validators import name_validator
from apps.costs.choices import (
    ACTION_IN_FORCE,
    ACTION_STATE_COLOURS,
    POLICY_STATE_COLOURS,
    ActionState,
    ActionTrigger,
    ApprovalKind,
    PolicyKind,
    PolicyScope,
    PolicyState,
)
from apps.inventory.models import Node


class CostPolicy(AuditedModel, PublicModel):
    """A cost or energy policy (apps/costs/policies): what it watches (kind and parameters, validated per kind),
    where (cluster, rack or inference service), and whether it may act on its own (standing approval, an admin's
    decision) or waits for an operator to approve each proposal."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    kind = models.CharField(max_length=24, choices=PolicyKind.choices)
    scope = models.CharField(max_length=16, choices=PolicyScope.choices, default=PolicyScope.CLUSTER)
    rack = models.ForeignKey(
        "inventory.Rack", null=True, blank=True, on_delete=models.CASCADE, related_name="cost_policies"
    )
    service = models.ForeignKey(
        "workloads.InferenceService", null=True, blank=True, on_delete=models.CASCADE, related_name="cost_policies"
    )
    parameters = models.JSONField(default=dict, blank=True, help_text="The kind's parameters (docs/costs.md).")
    standing_approval = models.BooleanField(
        default=False, help_text="Apply proposals without asking (an admin's decision); reverts never wait."
    )
    state = models.CharField(max_length=16, choices=PolicyState.choices, default=PolicyState.ENABLED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_evaluated = models.DateTimeField(null=True, blank=True)
    last_outcome = models.CharField(max_length=300, blank=True, help_text="What the last evaluation decided.")

    class Meta:
        ordering = ["name"]
        verbose_name = "cost policy"
        verbose_name_plural = "cost policies"
        db_table = "monitoring_costpolicy"
        constraints = [
            models.CheckConstraint(
                condition=(Q(scope=PolicyScope.RACK) & Q(rack__isnull=False) & Q(service__isnull=True))
                | (Q(scope=PolicyScope.SERVICE) & Q(service__isnull=False) & Q(rack__isnull=True))
                | (Q(scope=PolicyScope.CLUSTER) & Q(rack__isnull=True) & Q(service__isnull=True)),
                name="costpolicy_scope_names_its_object",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def state_colour(self) -> str:
        return POLICY_STATE_COLOURS.get(self.state, "grey")

    @property
    def scope_name(self) -> str:
        if self.scope == PolicyScope.RACK and self.rack_id:
            return f"rack {self.rack.name}"
        if self.scope == PolicyScope.SERVICE and self.service_id:
            return f"service {self.service.name}"
        return "the cluster"

    def nodes(self):
        """The compute nodes the policy acts on: its rack's or service's, or every node with GPUs."""
        if self.scope == PolicyScope.RACK:
            nodes = Node.objects.filter(rack_id=self.rack_id)
        elif self.scope == PolicyScope.SERVICE:
            nodes = Node.objects.filter(inference_services=self.service_id)
        else:
            nodes = Node.objects.all()
        return nodes.filter(gpus__isnull=False).distinct().order_by("hostname")

    def clean(self) -> None:
        errors = {}
        needs = {PolicyScope.RACK: "rack", PolicyScope.SERVICE: "service"}
        for scope, field in needs.items():
            given = getattr(self, f"{field}_id") is not None
            if self.scope == scope and not given:
                errors[field] = f"Name the {PolicyScope(scope).label.lower()} this policy acts on."
            elif self.scope != scope and given:
                errors[field] = f"Only a policy on a {PolicyScope(scope).label.lower()} names one."
        if errors:
            raise ValidationError(errors)


class PolicyActionQuerySet(models.QuerySet):
    def in_force(self) -> "PolicyActionQuerySet":
        return self.filter(state__in=ACTION_IN_FORCE)


class PolicyAction(AuditedModel, PublicModel):
    """What a policy proposed once: per node and GPU the exact commands (and those that revert them), the expected
    saving from the telemetry, who approved it, and when it was applied, re-applied and reverted."""

    policy = models.ForeignKey(CostPolicy, on_delete=models.CASCADE, related_name="actions")
    state = models.CharField(max_length=16, choices=ActionState.choices, default=ActionState.PROPOSED)
    trigger = models.CharField(max_length=16, choices=ActionTrigger.choices, default=ActionTrigger.DRY_RUN)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=300, help_text="Why the policy proposed it, from the telemetry.")
    plan = models.JSONField(
        default=list, help_text="Per GPU: hostname, gpu, sku, from_w, to_w, mean utilisation and power."
    )
    commands = models.JSONField(default=dict, help_text="hostname -> the command lines applying it runs there.")
    revert_commands = models.JSONField(default=dict, help_text="hostname -> the command lines reverting it runs.")
    notes = models.JSONField(default=list, help_text="Nodes left out, and why.")
    window_seconds = models.PositiveIntegerField(help_text="The telemetry window the proposal was judged over.")
    expected_kwh_per_day = models.FloatField(help_text="Expected saving at the window's load, per day.")
    price_per_kwh = models.FloatField(help_text="RACKPILOT_ENERGY_PRICE_PER_KWH when it was proposed.")
    currency = models.CharField(max_length=8, blank=True)
    throughput_factor = models.FloatField(
        default=1.0, help_text="Under full load, the share of today's throughput the lowered clocks keep."
    )
    approval = models.CharField(max_length=16, choices=ApprovalKind.choices, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted.")
    approved_at = models.DateTimeField(null=True, blank=True)
    apply_job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="The last apply."
    )
    revert_job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    applied_at = models.DateTimeField(null=True, blank=True)
    reapplied_at = models.DateTimeField(null=True, blank=True, help_text="Last put back after a node forgot it.")
    reapplied_count = models.PositiveIntegerField(default=0)
    reverted_at = models.DateTimeField(null=True, blank=True)
    revert_reason = models.CharField(max_length=300, blank=True)
    message = models.CharField(max_length=300, blank=True, help_text="How the last run ended.")
    manifest = models.JSONField(
        default=list, blank=True, help_text="Storage tiering: the files applying moved (source, destination, bytes)."
    )

    objects = PolicyActionQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-pk"]
        verbose_name = "policy action"
        db_table = "monitoring_policyaction"
        constraints = [
            models.CheckConstraint(condition=Q(window_seconds__gte=1), name="policyaction_window_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.policy.name}: {self.reason}"[:200]

    @property
    def state_colour(self) -> str:
        return ACTION_STATE_COLOURS.get(self.state, "grey")

    @property
    def expected_money_per_day(self) -> float:
        return self.expected_kwh_per_day * self.price_per_kwh

    @property
    def hostnames(self) -> list[str]:
        return sorted(self.commands)

    @property
    def command_rows(self) -> list[tuple[str, list[str], list[str]]]:
        """(hostname, what applying runs there, what reverting runs there), for the page."""
        return [(host, self.commands[host], self.revert_commands.get(host, [])) for host in self.hostnames]
