from rest_framework import serializers

from apps.core.api import EveryBadField, ReferenceField
from apps.inventory.models import Node
from apps.simulator import services
from apps.simulator.faults.kinds import CHOICES as FAULT_KIND_CHOICES
from apps.simulator.models import SimFault


class SimFaultSerializer(EveryBadField, serializers.ModelSerializer):
    """A fault of a simulated node; the target defaults by kind (first GPU, first data NIC, priority 3, ...)."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    node = ReferenceField(
        natural_key="hostname", queryset=Node.objects.all(), help_text="Host name (or public id) of the simulated node."
    )
    kind = serializers.ChoiceField(choices=FAULT_KIND_CHOICES)
    target = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    parameters = serializers.JSONField(required=False, default=dict)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = SimFault
        fields = ["id", "node", "kind", "target", "parameters", "created", "created_by"]
        read_only_fields = ["created"]
        validators = []  # services.inject_fault checks duplicates and says which target is taken

    def errors_beyond_shape(self, passed: dict, refused: set[str]) -> dict:
        return services.fault_errors(
            node=passed.get("node"),
            kind=passed.get("kind"),
            target=passed.get("target"),
            parameters=passed.get("parameters", {}),
        )
