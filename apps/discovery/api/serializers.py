from rest_framework import serializers

from apps.discovery.choices import DIFFERENCE_STATE_COLOURS
from apps.discovery.models import Difference, NodeFacts


class DifferenceSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.UUIDField(source="job.public_id", read_only=True)
    node = serializers.CharField(source="node.hostname", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    colour = serializers.SerializerMethodField()

    class Meta:
        model = Difference
        fields = [
            "id",
            "job",
            "node",
            "object_type",
            "object_key",
            "field",
            "expected",
            "discovered",
            "note",
            "state",
            "colour",
            "decided_by",
            "decided_at",
            "created",
        ]
        read_only_fields = fields

    def get_colour(self, difference) -> str:
        return DIFFERENCE_STATE_COLOURS.get(difference.state, "grey")


class NodeFactsSerializer(serializers.ModelSerializer):
    job = serializers.UUIDField(source="job.public_id", read_only=True)
    node = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = NodeFacts
        fields = ["job", "node", "created", "facts", "could_not_run", "notes"]
        read_only_fields = fields
