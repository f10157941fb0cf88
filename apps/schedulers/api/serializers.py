from rest_framework import serializers

from apps.inventory.choices import Plane


class TopologyConfQuerySerializer(serializers.Serializer):
    plane = serializers.ChoiceField(choices=[Plane.A, Plane.B], default=Plane.A)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - {"plane", "format"})
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown query parameter; this takes `plane`."] for name in unknown}
            )
        return attrs


class TopologyConfSerializer(serializers.Serializer):
    plane = serializers.CharField()
    text = serializers.CharField(help_text="topology.conf, ready for Slurm's topology/tree plugin.")
    leaves = serializers.IntegerField()
    spines = serializers.IntegerField()
    unplaced = serializers.ListField(
        child=serializers.CharField(), help_text="Compute nodes cabled to no leaf of this plane."
    )


class SchedulerNodeStateSerializer(serializers.Serializer):
    node = serializers.CharField(source="node.hostname")
    scheduler = serializers.CharField()
    present = serializers.BooleanField()
    state = serializers.CharField(source="state_text", help_text="As the controller prints it: IDLE+DRAIN.")
    drain_state = serializers.CharField(help_text="'', 'draining' or 'drained'.")
    reason = serializers.CharField()
    reason_by = serializers.CharField()
    reason_at = serializers.DateTimeField(allow_null=True)
    read_at = serializers.DateTimeField()
