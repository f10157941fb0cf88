from decimal import Decimal

from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api import EveryBadField, ReferenceField
from apps.inventory.models import Node, Rack
from apps.remediation import windows
from apps.remediation.backtest import BACKTEST_MAX_DAYS
from apps.remediation.choices import PartType
from apps.remediation.models import (
    MaintenanceWindow,
    PartReplacement,
    RemediationDecision,
    RemediationPolicy,
    Repair,
    RepairGate,
)
from apps.remediation.repairs import SERIAL_PATTERN, SERIAL_RULE

# A kind slug (xid79) or a glob over kinds (xid*, ecc_?): what fnmatch reads, nothing else. The validator is also
# the schema's `pattern` (drf-spectacular writes \Z as $), so a client reads the rule the API applies.
kind_pattern_validator = RegexValidator(
    r"^[a-z0-9*?_\[\]!-]{1,48}\Z",
    "An event kind (e.g. xid79) or a glob over kinds (e.g. xid*): lower-case letters, digits, _ - * ? [].",
)


class RemediationPolicySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    # A number, so the schema states its bounds (a decimal string's cannot); kept to the hundredth.
    breaker_max_percent = serializers.FloatField(
        min_value=0.01,
        max_value=100,
        required=False,
        help_text="Percent of the compute fleet automation may take out in the window: above 0, at most 100.",
    )
    canary_racks = serializers.SlugRelatedField(
        slug_field="public_id",
        queryset=Rack.objects.all(),
        many=True,
        required=False,
        error_messages={"does_not_exist": "No rack matches {value}."},
        help_text="Racks' ids: in mode on, the policy acts on these racks' nodes only (shadow elsewhere); "
        "none: the whole fleet.",
    )
    rollout = serializers.ChoiceField(
        source="stage",
        choices=["shadow", "canary", "fleet"],
        read_only=True,
        help_text="Its rollout stage: shadow, on for its canary racks (canary), or on for the fleet.",
    )

    class Meta:
        model = RemediationPolicy
        fields = [
            "id", "name", "kind_pattern", "min_severity", "action", "mode", "enabled", "breaker_max_nodes",
            "breaker_max_percent", "breaker_window_minutes", "max_attempts", "canary_racks", "rollout", "created",
            "updated",
        ]  # fmt: skip
        read_only_fields = ["created", "updated"]
        extra_kwargs = {"kind_pattern": {"validators": [kind_pattern_validator]}}

    def validate_breaker_max_percent(self, value: float) -> Decimal:
        return Decimal(str(value)).quantize(Decimal("0.01"))


class RemediationDecisionSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    event = serializers.UUIDField(source="event.public_id", read_only=True)
    event_summary = serializers.CharField(source="event.summary", read_only=True)
    policy = serializers.UUIDField(source="policy.public_id", read_only=True)
    policy_name = serializers.CharField(source="policy.name", read_only=True)
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True, allow_null=True)
    training_job = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    window = serializers.SlugRelatedField(slug_field="public_id", read_only=True, allow_null=True)

    class Meta:
        model = RemediationDecision
        fields = [
            "id", "event", "event_summary", "policy", "policy_name", "node", "kind", "mode", "action", "escalated",
            "attempt", "opens_repair", "outcome", "reason", "job_id", "decided_at",
            # checkpoint-aware quarantine: the job under the node, the wait's deadline and the drain's facts
            "training_job", "drain_by", "checkpoint_before", "decided_step", "drained_at", "drained_step",
            "checkpoint_step", "steps_lost", "gpus", "seconds_per_step", "resume_incident",
            # deferred into a maintenance window: the window and when the action runs
            "window", "act_at",
        ]  # fmt: skip
        read_only_fields = fields


class MaintenanceWindowSerializer(EveryBadField, serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    rack = ReferenceField(
        queryset=Rack.objects.all(), natural_key="name", required=False, allow_null=True, help_text="Name or public id."
    )
    node = ReferenceField(
        queryset=Node.objects.all(), natural_key="hostname", required=False, allow_null=True,
        help_text="Host name or public id.",
    )  # fmt: skip
    state = serializers.SerializerMethodField(help_text="upcoming, open or past, now.")
    deferred_decisions = serializers.SlugRelatedField(
        slug_field="public_id", many=True, read_only=True, help_text="The decisions deferred into it."
    )

    class Meta:
        model = MaintenanceWindow
        fields = ["id", "rack", "node", "starts", "ends", "reason", "state", "deferred_decisions", "created", "updated"]
        read_only_fields = ["created", "updated"]

    @extend_schema_field(serializers.ChoiceField(choices=["upcoming", "open", "past"]))
    def get_state(self, window: MaintenanceWindow) -> str:
        return windows.state(window, now=timezone.now())

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        found = windows.problems(
            rack=passed.get("rack"),
            node=passed.get("node"),
            starts=passed.get("starts"),
            ends=passed.get("ends"),
            subject_refused=bool(refused & {"rack", "node"}),
        )
        return {field: [message] for field, message in found.items()}

    def validate(self, attrs: dict) -> dict:
        if found := self.errors_beyond_shape(attrs, set()):
            raise serializers.ValidationError(found)
        return attrs


BACKTEST_WINDOWS = {"1d": 1, "7d": 7, "30d": 30, "90d": BACKTEST_MAX_DAYS}


class BacktestOptionsSerializer(serializers.Serializer):
    policy = serializers.SlugRelatedField(
        slug_field="public_id",
        queryset=RemediationPolicy.objects.all(),
        required=False,
        allow_null=True,
        error_messages={"does_not_exist": "No remediation policy matches {value}."},
        help_text="The policy the candidate changes (its other fields as they are); none: a new policy.",
    )
    window = serializers.ChoiceField(
        choices=list(BACKTEST_WINDOWS), default="7d", help_text="The recorded events of this window, ending now."
    )
    campaign = serializers.BooleanField(default=False, help_text="Also replay a simulated fault campaign.")
    seed = serializers.IntegerField(default=1, min_value=0, max_value=2**31 - 1, help_text="The campaign's seed.")

    OPTIONS = ("policy", "window", "campaign", "seed")


class BacktestRequestSerializer(BacktestOptionsSerializer, RemediationPolicySerializer):
    """The candidate policy's fields, as /api/remediation-policies/ takes them (changes only, when `policy` names the
    policy it edits), and how to back-test it."""

    class Meta(RemediationPolicySerializer.Meta):
        fields = [*RemediationPolicySerializer.Meta.fields, *BacktestOptionsSerializer.OPTIONS]


class BacktestTripSerializer(serializers.Serializer):
    node = serializers.CharField()
    at = serializers.DateTimeField()
    cause = serializers.CharField(
        help_text="The leaf switch every tripped node sits behind, the likely cause; blank: none shared."
    )


class BacktestDecisionSerializer(serializers.Serializer):
    event = serializers.UUIDField()
    kind = serializers.CharField()
    node = serializers.CharField()
    policy = serializers.CharField()
    mode = serializers.CharField()
    action = serializers.CharField()
    escalated = serializers.BooleanField()
    outcome = serializers.CharField()
    reason = serializers.CharField()
    decided_at = serializers.DateTimeField()


class BacktestSideSerializer(serializers.Serializer):
    policies = serializers.ListField(child=serializers.CharField(), help_text="The enabled policies replayed.")
    events = serializers.IntegerField()
    quarantines = serializers.IntegerField(help_text="Quarantines done (on) or meant (shadow).")
    breaker_trips = BacktestTripSerializer(many=True)
    escalations = serializers.IntegerField()
    false_escalations = serializers.IntegerField(help_text="Escalated, and a validation cleared the event after.")
    refusals = serializers.IntegerField()
    failed = serializers.IntegerField()
    work_gpu_hours = serializers.FloatField(help_text="Jobs' work lost since their last checkpoint.")
    quarantine_gpu_hours = serializers.FloatField(help_text="Nodes drained by the replay, until their events cleared.")
    gpu_hours_lost = serializers.FloatField()
    decisions = BacktestDecisionSerializer(many=True)


class BacktestReplaySerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=["recorded", "campaign"])
    events = serializers.IntegerField()
    in_force = BacktestSideSerializer()
    candidate = BacktestSideSerializer()


class BacktestReportSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    replays = BacktestReplaySerializer(many=True)


class PartSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True)
    repair = serializers.UUIDField(source="repair.public_id", read_only=True)
    replaced_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = PartReplacement
        fields = [
            "id", "repair", "node", "component_type", "component_label", "old_serial", "new_serial", "replaced_at",
            "replaced_by", "note",
        ]  # fmt: skip
        read_only_fields = fields


class GateSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    benchmark_runs = serializers.SlugRelatedField(source="runs", slug_field="public_id", many=True, read_only=True)

    class Meta:
        model = RepairGate
        fields = ["id", "kind", "parameters", "state", "benchmark_runs", "summary", "started_at", "finished_at"]
        read_only_fields = fields


class RepairSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True)
    events = serializers.SlugRelatedField(slug_field="public_id", many=True, read_only=True)
    decisions = serializers.SlugRelatedField(slug_field="public_id", many=True, read_only=True)
    parts = PartSerializer(many=True, read_only=True)
    gates = GateSerializer(many=True, read_only=True)
    opened_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    closed_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Repair
        fields = [
            "id", "node", "state", "reason", "events", "decisions", "gate_kind", "gate_parameters", "gate_reason",
            "evidence", "evidence_job_id", "evidence_captured_at", "parts", "gates", "resume_job_id", "notes",
            "opened_at", "opened_by", "closed_at", "closed_by",
        ]  # fmt: skip
        read_only_fields = fields


class OpenRepairSerializer(serializers.Serializer):
    node = ReferenceField(queryset=Node.objects.all(), natural_key="hostname", help_text="Host name or public id.")
    reason = serializers.CharField(max_length=300)


class NoteSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


class CloseSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=1000)


class RecordPartSerializer(serializers.Serializer):
    component_type = serializers.ChoiceField(choices=PartType.choices)
    gpu_index = serializers.IntegerField(min_value=0, max_value=15, required=False, allow_null=True)
    label = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    old_serial = serializers.RegexField(
        r"^[!-~]{0,64}\Z",
        required=False,
        allow_blank=True,
        default="",
        error_messages={"invalid": SERIAL_RULE},
        help_text="Empty for a GPU: the inventory's.",
    )
    new_serial = serializers.RegexField(SERIAL_PATTERN, error_messages={"invalid": SERIAL_RULE})
    note = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
