"""Workload viewsets: viewers read, operators create and change (they run the cluster's work)."""

from django.db.models import Prefetch

from apps.accounts.choices import Role
from apps.inventory.api.views import InventoryViewSet
from apps.workloads.api import serializers
from apps.workloads.filters import InferenceServiceFilterSet, TrainingJobFilterSet
from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode


class TrainingJobViewSet(InventoryViewSet):
    queryset = (
        TrainingJob.objects.select_related("checkpoint_tier")
        .prefetch_related(Prefetch("members", queryset=TrainingJobNode.objects.select_related("node")), "nodes")
        .order_by("name", "pk")
    )
    serializer_class = serializers.TrainingJobSerializer
    filterset_class = TrainingJobFilterSet
    ordering_fields = ["name", "state", "created", "started_at"]
    write_role = Role.OPERATOR


class InferenceServiceViewSet(InventoryViewSet):
    queryset = InferenceService.objects.prefetch_related("nodes").order_by("name", "pk")
    serializer_class = serializers.InferenceServiceSerializer
    filterset_class = InferenceServiceFilterSet
    ordering_fields = ["name", "state", "created", "design_tokens_per_second"]
    write_role = Role.OPERATOR
