from decimal import Decimal

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.core.api import ReferenceField
from apps.inventory.models import Node
from apps.remediation.choices import PartType
from apps.remediation.models import PartReplacement, RemediationDecision, RemediationPolicy, Repair, RepairGate
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

    class Meta:
        model = RemediationPolicy
        fields = [
            "id", "name", "kind_pattern", "min_severity", "action", "mode", "enabled", "breaker_max_nodes",
            "breaker_max_percent", "breaker_window_minutes", "max_attempts", "created", "updated",
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

    class Meta:
        model = RemediationDecision
        fields = [
            "id", "event", "event_summary", "policy", "policy_name", "node", "kind", "mode", "action", "escalated",
            "attempt", "opens_repair", "outcome", "reason", "job_id", "decided_at",
        ]  # fmt: skip
        read_only_fields = fields


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
