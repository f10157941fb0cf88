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


class TaintSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField(allow_blank=True)
    effect = serializers.CharField(help_text="NoSchedule, PreferNoSchedule or NoExecute.")
    time_added = serializers.CharField(allow_blank=True, help_text="ISO 8601; NoExecute taints only.")


class ConditionSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="Ready, MemoryPressure, … or a problem detector's own.")
    status = serializers.CharField(help_text="True, False or Unknown.")
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    since = serializers.CharField(allow_blank=True, help_text="lastTransitionTime, ISO 8601.")


class SchedulerNodeStateSerializer(serializers.Serializer):
    node = serializers.CharField(source="node.hostname")
    scheduler = serializers.CharField()
    present = serializers.BooleanField()
    state = serializers.CharField(
        source="state_text", help_text="As the controller prints it: IDLE+DRAIN, Ready+SchedulingDisabled."
    )
    drain_state = serializers.CharField(help_text="'', 'draining' or 'drained'.")
    reason = serializers.CharField()
    reason_by = serializers.CharField()
    reason_at = serializers.DateTimeField(allow_null=True)
    read_at = serializers.DateTimeField()
    taints = serializers.ListField(child=TaintSerializer(), help_text="Kubernetes: the node's taints (empty in Slurm).")
    conditions = serializers.ListField(
        child=ConditionSerializer(), help_text="Kubernetes: the node's conditions (empty in Slurm)."
    )
