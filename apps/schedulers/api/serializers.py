from rest_framework import serializers

from apps.inventory.choices import Plane
from apps.schedulers.compute_domain import manifest_yaml


class TopologyConfQuerySerializer(serializers.Serializer):
    plane = serializers.ChoiceField(choices=[Plane.A, Plane.B], default=Plane.A)
    plugin = serializers.ChoiceField(choices=["tree", "block"], default="tree")

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - {"plane", "plugin", "format"})
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown query parameter; this takes `plane` and `plugin`."] for name in unknown}
            )
        return attrs


class BlockSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The NVLink domain's name: Slurm's BlockName.")
    system = serializers.CharField(help_text="The rack-scale system: GB200 NVL72, …")
    nodes = serializers.ListField(child=serializers.CharField(), help_text="Its compute trays.")


class TopologyConfSerializer(serializers.Serializer):
    plugin = serializers.CharField(help_text="tree or block.")
    plane = serializers.CharField(allow_null=True, help_text="The plane of the tree; null for blocks.")
    text = serializers.CharField(help_text="topology.conf, ready for Slurm's topology/tree or topology/block plugin.")
    leaves = serializers.IntegerField(help_text="tree: the leaves listed (0 for blocks).")
    spines = serializers.IntegerField(help_text="tree: the spines listed (0 for blocks).")
    blocks = BlockSerializer(many=True, help_text="block: one per NVLink domain (empty for the tree).")
    block_sizes = serializers.ListField(
        child=serializers.IntegerField(), help_text="block: BlockSizes, the base size first (empty for the tree)."
    )
    unplaced = serializers.ListField(
        child=serializers.CharField(),
        help_text="Compute nodes cabled to no leaf of this plane (tree) or in no NVLink domain (block).",
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


class ComputeDomainSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = serializers.CharField(help_text="The NVLink domain's name in the inventory.")
    rack = serializers.CharField(source="rack.name")
    system = serializers.CharField()
    nodes = serializers.SerializerMethodField(help_text="Its scheduled compute trays.")
    manifest = serializers.SerializerMethodField(
        help_text="The ComputeDomain (resource.nvidia.com/v1beta1) for NVIDIA's DRA driver, as YAML."
    )

    def get_nodes(self, domain) -> list[str]:
        return [node.hostname for node in domain.scheduled_trays]

    def get_manifest(self, domain) -> str:
        return manifest_yaml(domain, [node.hostname for node in domain.scheduled_trays])
