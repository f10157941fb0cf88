from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.simulator import services
from apps.simulator.api.serializers import SimFaultSerializer
from apps.simulator.filters import SimFaultFilterSet
from apps.simulator.models import SimFault


class SimFaultViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Faults of the simulated cluster: viewers read them, operators inject and clear them."""

    queryset = SimFault.objects.select_related("node", "created_by").order_by("node__hostname", "kind", "target", "pk")
    serializer_class = SimFaultSerializer
    filterset_class = SimFaultFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = ["created", "kind"]
    search_fields = ["node__hostname", "target"]
    write_role = Role.OPERATOR

    def create(self, request, *args, **kwargs):
        incoming = self.get_serializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        fault = services.inject_fault(
            node=data["node"],
            kind=data["kind"],
            target=data.get("target", ""),
            parameters=data.get("parameters") or {},
            user=request.user,
        )
        return Response(self.get_serializer(fault).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        services.clear_fault(fault=instance)
