"""The scheduler's view of the nodes (read only) and Slurm's topology.conf from the inventory."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.response import Response

from apps.schedulers.api.serializers import (
    SchedulerNodeStateSerializer,
    TopologyConfQuerySerializer,
    TopologyConfSerializer,
)
from apps.schedulers.models import SchedulerNodeState
from apps.schedulers.topology_conf import topology_conf


class SchedulerNodeViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """What the scheduler last said about each node: state, drain, reason (who set it, when), when it was read."""

    queryset = SchedulerNodeState.objects.select_related("node").order_by("node__hostname")
    serializer_class = SchedulerNodeStateSerializer


class _OneObjectSchema(AutoSchema):
    def _is_list_view(self, serializer=None) -> bool:
        return False


class TopologyConfViewSet(viewsets.ViewSet):
    """Slurm's topology.conf (topology/tree) generated from the inventory's switches and cables, for one plane."""

    schema = _OneObjectSchema()

    @extend_schema(
        parameters=[OpenApiParameter("plane", str, enum=["A", "B"], description="The fabric plane (default A).")],
        responses=TopologyConfSerializer,
    )
    def list(self, request):
        query = TopologyConfQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(TopologyConfSerializer(topology_conf(plane=query.validated_data["plane"])).data)
