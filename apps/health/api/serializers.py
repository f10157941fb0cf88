from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.health.choices import ClearedBy, ComponentType
from apps.health.costs import RELIABILITY_WINDOWS, failure_cost
from apps.health.models import HealthEvent


class HealthEventSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    component = serializers.CharField(source="component_label", read_only=True)
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True, allow_null=True)
    gpu = serializers.IntegerField(source="gpu.index", read_only=True, allow_null=True, default=None)
    nic = serializers.CharField(source="nic.name", read_only=True, allow_null=True, default=None)
    cable = serializers.UUIDField(source="cable.public_id", read_only=True, allow_null=True, default=None)
    switch = serializers.CharField(source="switch.name", read_only=True, allow_null=True, default=None)
    sources = serializers.ListField(child=serializers.CharField(), read_only=True)
    evidence = serializers.ListField(
        child=serializers.DictField(), read_only=True, help_text="The newest observations, each with `at`, `source`."
    )
    open = serializers.BooleanField(source="is_open", read_only=True)
    cleared_by = serializers.ChoiceField(
        choices=[("", "Not cleared"), *ClearedBy.choices], read_only=True, help_text="Blank while the event is open."
    )
    cleared_by_user = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    gpu_hours_lost = serializers.SerializerMethodField(
        help_text='GPU-hours the failure cost (docs/health.md, "Failure costs"): its training jobs\' work since their '
        "last checkpoint on all their GPUs, and its node's drained time on the node's GPUs (still drained: to now)."
    )

    class Meta:
        model = HealthEvent
        fields = [
            "id", "component_type", "component", "node", "gpu", "nic", "cable", "switch", "switch_port", "source",
            "sources", "kind", "severity", "summary", "first_seen", "last_seen", "count", "evidence", "open",
            "cleared_at", "cleared_by", "cleared_by_user", "clear_reason", "clear_evidence", "gpu_hours_lost",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField())
    def get_gpu_hours_lost(self, event: HealthEvent) -> float:
        # The list works out a page's costs in one pass (HealthEventViewSet.list); one event alone here.
        cost = self.context.get("costs", {}).get(event.pk) or failure_cost(event, now=timezone.now(), slo=False)
        return round(cost.gpu_hours_lost, 3)


class ClearSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, help_text="Why the event is cleared (kept in the audit log).")


class ReliabilityQuerySerializer(serializers.Serializer):
    window = serializers.ChoiceField(choices=list(RELIABILITY_WINDOWS), required=False, allow_blank=True)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - {"window", "format"})
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown query parameter; this takes `window`."] for name in unknown}
            )
        for name in self.initial_data:
            if len(self.initial_data.getlist(name)) > 1:
                raise serializers.ValidationError({name: ["Give this parameter once."]})
        return attrs


class MtbfSerializer(serializers.Serializer):
    component_type = serializers.ChoiceField(choices=ComponentType.choices)
    operating_hours = serializers.FloatField(allow_null=True, help_text="Null: no inventory to count hours on.")
    failures = serializers.IntegerField(help_text="Critical and major events first seen in the window.")
    mtbf_hours = serializers.FloatField(allow_null=True, help_text="Operating hours per failure; null without one.")


class LemonNodeSerializer(serializers.Serializer):
    node = serializers.CharField(source="node.hostname")
    gpu_hours_lost = serializers.FloatField()
    failures = serializers.IntegerField()


class LemonPartSerializer(serializers.Serializer):
    component_type = serializers.ChoiceField(choices=ComponentType.choices)
    component = serializers.CharField()
    serial = serializers.CharField(help_text="The GPU's serial; blank for parts the inventory keeps none of.")
    node = serializers.CharField(source="node.hostname", allow_null=True, default=None)
    gpu_hours_lost = serializers.FloatField()
    failures = serializers.IntegerField()


class ReliabilitySerializer(serializers.Serializer):
    window = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    mtbf = MtbfSerializer(many=True)
    nodes = LemonNodeSerializer(many=True, help_text="The nodes whose failures cost the most, most first.")
    parts = LemonPartSerializer(many=True, help_text="The parts whose failures cost the most, most first.")
