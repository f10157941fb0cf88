import re
from decimal import Decimal

from rest_framework import serializers

from apps.remediation.models import RemediationDecision, RemediationPolicy

# A kind slug (xid79) or a glob over kinds (xid*, ecc_?): what fnmatch reads, nothing else.
KIND_PATTERN = re.compile(r"^[a-z0-9*?_\[\]!-]{1,48}\Z")


class RemediationPolicySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    breaker_max_percent = serializers.DecimalField(
        max_digits=5,
        decimal_places=2,
        min_value=Decimal("0.01"),
        max_value=Decimal(100),
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

    def validate_kind_pattern(self, value: str) -> str:
        if not KIND_PATTERN.match(value):
            raise serializers.ValidationError(
                "An event kind (e.g. xid79) or a glob over kinds (e.g. xid*): lower-case letters, digits, _ - * ? []."
            )
        return value


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
