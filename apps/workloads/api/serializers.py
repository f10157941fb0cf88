"""Workload serializers. Nodes are written as host names (or public ids) and read back as brief references; a
training job's `nodes` are in node-rank order and its `rank_map` is read only."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.inventory.api.serializers import COMMON, TIMESTAMPS, BriefRelatedField, InventorySerializer
from apps.inventory.models import Node, StorageTier
from apps.workloads import services
from apps.workloads.models import InferenceService, TrainingJob


class RankSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.CharField(help_text="Host name.")
    gpu = serializers.IntegerField(help_text="Local GPU index (LOCAL_RANK).")


class PlacementSerializer(serializers.Serializer):
    hosts = serializers.ListField(child=serializers.CharField(), help_text="In node-rank order.")
    until = serializers.DateTimeField()
    reason = serializers.CharField()


class TrainingJobSerializer(InventorySerializer):
    nodes = BriefRelatedField(
        queryset=Node.objects.all(), natural_key="hostname", many=True, help_text="In node-rank order: rank 0 first."
    )
    checkpoint_tier = BriefRelatedField(
        queryset=StorageTier.objects.all(), natural_key="name", required=False, allow_null=True
    )
    world_size = serializers.SerializerMethodField()
    rank_map = serializers.SerializerMethodField()
    placements = PlacementSerializer(
        many=True, read_only=True, help_text="Earlier node lists, oldest first (a recovery moved the job)."
    )

    class Meta:
        model = TrainingJob
        fields = [
            *COMMON,
            "name",
            "workload_class",
            "framework",
            "launcher",
            "nodes",
            "ranks_per_node",
            "world_size",
            "rank_map",
            "checkpoint_dir",
            "checkpoint_tier",
            "checkpoint_interval_steps",
            "log_path",
            "state",
            "started_at",
            "entrypoint",
            "recovery_policy",
            "recovery_max_retries",
            "checkpoint_keep",
            "placements",
            "progress_error",
            "progress_error_at",
            "comments",
            *TIMESTAMPS,
        ]
        read_only_fields = ["progress_error", "progress_error_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        nodes = self.fields["nodes"].child_relation
        data["nodes"] = [nodes.to_representation(member.node) for member in self._members(instance)]
        return data

    def _members(self, obj) -> list:
        # From the prefetched members (the viewset loads them), so a list costs no query per job.
        return sorted(obj.members.all(), key=lambda member: member.node_rank)

    def get_world_size(self, obj) -> int:
        return len(self._members(obj)) * obj.ranks_per_node

    @extend_schema_field(RankSerializer(many=True))
    def get_rank_map(self, obj) -> list[dict]:
        return [
            {"rank": member.node_rank * obj.ranks_per_node + local, "node": member.node.hostname, "gpu": local}
            for member in self._members(obj)
            for local in range(obj.ranks_per_node)
        ]

    def validate_nodes(self, nodes):
        if len({node.pk for node in nodes}) != len(nodes):
            raise serializers.ValidationError("A node appears twice; each node holds one place in a job.")
        return nodes

    def create(self, validated_data):
        nodes = validated_data.pop("nodes")
        job = TrainingJob.objects.create(**validated_data)
        services.set_training_nodes(job=job, nodes=nodes)
        return job

    def update(self, instance, validated_data):
        nodes = validated_data.pop("nodes", None)
        job = super().update(instance, validated_data)
        if nodes is not None:
            services.set_training_nodes(job=job, nodes=nodes)
        return job


class InferenceServiceSerializer(InventorySerializer):
    nodes = BriefRelatedField(queryset=Node.objects.all(), natural_key="hostname", many=True)

    class Meta:
        model = InferenceService
        fields = [
            *COMMON,
            "name",
            "workload_class",
            "model",
            "endpoint",
            "nodes",
            "design_tokens_per_second",
            "latency_target_ms",
            "state",
            "comments",
            *TIMESTAMPS,
        ]

    def validate_nodes(self, nodes):
        if not nodes:
            raise serializers.ValidationError("A service runs on at least one node.")
        return nodes
