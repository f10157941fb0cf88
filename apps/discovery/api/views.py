from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.choices import ChangeSource
from apps.discovery import services
from apps.discovery.api.serializers import DifferenceSerializer, NodeFactsSerializer
from apps.discovery.filters import DifferenceFilterSet, NodeFactsFilterSet
from apps.discovery.models import Difference, NodeFacts


class DifferenceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Where discovered facts differ from the inventory: viewers read them, operators accept or dismiss them."""

    queryset = Difference.objects.select_related("node", "job", "decided_by").order_by(
        "-job__created", "node__hostname", "object_type", "object_key", "field", "id"
    )
    serializer_class = DifferenceSerializer
    filterset_class = DifferenceFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["created", "state"]
    search_fields = ["node__hostname", "object_key", "field"]
    write_role = Role.OPERATOR

    def get_queryset(self):
        return super().get_queryset().visible_to(self.request.user)

    @extend_schema(
        request=None,
        responses={
            200: DifferenceSerializer,
            409: OpenApiResponse(description="The GPU, NIC or volume it is about was deleted; nothing changed."),
        },
    )
    @action(detail=True, methods=["post"])
    def accept(self, request, id=None):
        """Update the inventory to what was discovered (audited), and close the difference."""
        try:
            difference = services.accept_difference(
                difference=self.get_object(), user=request.user, source=ChangeSource.API
            )
        except services.InventoryObjectGone as error:
            return Response({"object_key": [str(error)]}, status=status.HTTP_409_CONFLICT)
        except services.DecisionError as error:
            raise ValidationError({"state": [str(error)]}) from None
        return Response(self.get_serializer(difference).data)

    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "NodeFixDeployment",
                {
                    "deployment": serializers.UUIDField(),
                    "name": serializers.CharField(),
                    "job": serializers.UUIDField(),
                    "step": serializers.CharField(),
                },
            )
        },
    )
    @action(detail=True, methods=["post"], url_path="fix-node")
    def fix_node(self, request, id=None):
        """The node is wrong: keep the inventory (the difference is dismissed) and start a deployment over the node
        that applies the plan step putting it right, approved by the caller; its other steps only check."""
        difference = self.get_object()
        try:
            run = services.fix_node(difference=difference, user=request.user)
        except services.DecisionError as error:
            raise ValidationError({"state": [str(error)]}) from None
        body = {
            "deployment": run.deployment.public_id,
            "name": run.deployment.name,
            "job": run.job.public_id,
            "step": difference.node_fix_step,
        }
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: DifferenceSerializer})
    @action(detail=True, methods=["post"])
    def dismiss(self, request, id=None):
        """Close the difference and leave the inventory as it is."""
        try:
            difference = services.dismiss_difference(difference=self.get_object(), user=request.user)
        except services.DecisionError as error:
            raise ValidationError({"state": [str(error)]}) from None
        return Response(self.get_serializer(difference).data)


class NodeFactsViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """What each node reported in each discovery job, parsed (newest first)."""

    queryset = NodeFacts.objects.select_related("node", "job").order_by("-created", "-id")
    serializer_class = NodeFactsSerializer
    filterset_class = NodeFactsFilterSet
    ordering_fields = ["created"]
    search_fields = ["node__hostname"]
