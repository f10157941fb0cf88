from decimal import Decimal

from django.core.validators import RegexValidator
from rest_framework import serializers

from apps.remediation.models import RemediationDecision, RemediationPolicy

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
    training_job = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = RemediationDecision
        fields = [
            "id", "event", "event_summary", "policy", "policy_name", "node", "kind", "mode", "action", "escalated",
            "attempt", "opens_repair", "outcome", "reason", "job_id", "decided_at",
            # checkpoint-aware quarantine: the job under the node, the wait's deadline and the drain's facts
            "training_job", "drain_by", "checkpoint_before", "decided_step", "drained_at", "drained_step",
            "checkpoint_step", "steps_lost", "gpus", "seconds_per_step", "resume_incident",
        ]  # fmt: skip
        read_only_fields = fields
