"""The scheduler's view of the nodes (read only) and Slurm's topology.conf from the inventory."""

from django.db.models import Prefetch
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.response import Response

from apps.inventory.models import NvlinkDomain
from apps.schedulers.api.serializers import (
    ComputeDomainSerializer,
    SchedulerNodeStateSerializer,
    TopologyConfQuerySerializer,
    TopologyConfSerializer,
)
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.services import scheduled_nodes
from apps.schedulers.topology_conf import block_topology, topology_conf


class SchedulerNodeViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """What the scheduler last said about each node: state, drain, reason (who set it, when), when it was read."""

    queryset = SchedulerNodeState.objects.select_related("node").order_by("node__hostname")
    serializer_class = SchedulerNodeStateSerializer


class ComputeDomainViewSet(viewsets.ReadOnlyModelViewSet):
    """Each NVLink domain's ComputeDomain for Kubernetes (NVIDIA's DRA driver), generated from the inventory."""

    serializer_class = ComputeDomainSerializer
    lookup_field = "public_id"
    ordering_fields = ["name"]

    def get_queryset(self):
        trays = scheduled_nodes().order_by("hostname")
        return (
            NvlinkDomain.objects.select_related("rack")
            .prefetch_related(Prefetch("compute_trays", queryset=trays, to_attr="scheduled_trays"))
            .order_by("name")
        )


class _OneObjectSchema(AutoSchema):
    def _is_list_view(self, serializer=None) -> bool:
        return False


class TopologyConfViewSet(viewsets.ViewSet):
    """Slurm's topology.conf generated from the inventory: topology/tree from one plane's switches and cables, or
    topology/block with a block per NVLink domain (`plugin=block`)."""

    schema = _OneObjectSchema()

    @extend_schema(
        parameters=[
            OpenApiParameter("plane", str, enum=["A", "B"], description="The fabric plane of the tree (default A)."),
            OpenApiParameter(
                "plugin", str, enum=["tree", "block"], description="Slurm's topology plugin (default tree)."
            ),
        ],
        responses=TopologyConfSerializer,
    )
    def list(self, request):
        query = TopologyConfQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        plane, plugin = query.validated_data["plane"], query.validated_data["plugin"]
        if plugin == "block":
            blocks = block_topology(plane=plane)
            answer = {
                "plugin": plugin,
                "plane": None,
                "text": blocks.text,
                "leaves": 0,
                "spines": 0,
                "blocks": blocks.blocks,
                "block_sizes": blocks.block_sizes,
                "unplaced": blocks.unplaced,
            }
        else:
            tree = topology_conf(plane=plane)
            answer = {**vars(tree), "plugin": plugin, "blocks": [], "block_sizes": []}
        return Response(TopologyConfSerializer(answer).data)
