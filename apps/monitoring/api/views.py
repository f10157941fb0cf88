from django.db import transaction
from django.shortcuts import get_object_or_404
from django_filters import CharFilter
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.filters import FilterSet
from apps.inventory.api.views import UUID_PATTERN
from apps.inventory.filters import node_ref
from apps.inventory.models import Node
from apps.jobs.api.serializers import JobSerializer
from apps.monitoring import gpuhours, health, services
from apps.monitoring.api.serializers import (
    BmcPowerSerializer,
    BmcReadingSerializer,
    BmcSerializer,
    FleetHealthSerializer,
    GpuHoursSerializer,
    NodeHealthSerializer,
    SloSerializer,
    SloStatusSerializer,
)
from apps.monitoring.bmc.power import start_bmc_power
from apps.monitoring.models import Bmc, BmcReading, Slo
from apps.monitoring.telemetry import WINDOWS, TelemetryError, Window


class BmcFilterSet(FilterSet):
    node = node_ref()
    switch_tray = CharFilter(field_name="switch_tray__name", label="NVLink switch tray name")

    class Meta:
        model = Bmc
        fields = ["node", "switch_tray", "protocol", "last_result"]


class BmcViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """The BMC settings of nodes and NVLink switch trays: viewers read, operators write; the password is
    write-only."""

    queryset = Bmc.objects.select_related("node", "switch_tray").order_by("node__hostname", "switch_tray__name", "pk")
    serializer_class = BmcSerializer
    filterset_class = BmcFilterSet
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    @transaction.atomic
    def perform_create(self, serializer):
        serializer.save()

    @transaction.atomic
    def perform_update(self, serializer):
        serializer.save()

    @extend_schema(responses=BmcReadingSerializer(many=True))
    @action(detail=True, methods=["get"])
    def readings(self, request, public_id=None):
        """The BMC's latest poll: one reading per sensor."""
        bmc = self.get_object()
        rows = BmcReading.objects.latest_per_sensor(bmc.owner)
        for row in rows:
            row.node, row.switch_tray = bmc.node, bmc.switch_tray
        return Response(BmcReadingSerializer(rows, many=True).data)


class SloViewSet(viewsets.ModelViewSet):
    """Business SLOs: viewers read and see each one's budget, operators define them."""

    queryset = Slo.objects.select_related("service", "training_job", "rack").order_by("name")
    serializer_class = SloSerializer
    filterset_fields = ["objective", "scope"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    @extend_schema(request=None, responses=SloStatusSerializer)
    @action(detail=True, methods=["get"])
    def status(self, request, public_id=None):
        """The SLO over 1 h, 24 h, 7 d and 30 d: compliance, error budget left, burn rate; the nodes and GPUs that drag
        it, with their open incidents and failing benchmark pairs."""
        return Response(SloStatusSerializer(services.slo_status(self.get_object())).data)


class _OneObjectSchema(AutoSchema):
    """The schema of a `list` route that answers one object (not an array)."""

    def _is_list_view(self, serializer=None) -> bool:
        return False


class HealthViewSet(viewsets.ViewSet):
    """Fleet health for schedulers: per compute node, healthy or not and why; the 0-100 number and its parts."""

    schema = _OneObjectSchema()

    @extend_schema(responses=FleetHealthSerializer)
    def list(self, request):
        return Response(FleetHealthSerializer(health.fleet_health()).data)

    @extend_schema(
        parameters=[OpenApiParameter("hostname", str, OpenApiParameter.PATH, description="A compute node's name.")],
        responses={200: NodeHealthSerializer, 404: OpenApiResponse(description="No such compute node.")},
    )
    @action(detail=False, url_path=r"nodes/(?P<hostname>[A-Za-z0-9.-]{1,253})")
    def node(self, request, hostname: str):
        """One compute node's health and reasons, as the HealthCheckProgram asks (scripts/rackpilot-healthcheck)."""
        found = health.node_health(hostname=hostname)
        if not found:
            raise NotFound(f"No compute node named {hostname!r}.")
        return Response(NodeHealthSerializer(found[0]).data)


class GpuHoursQuerySerializer(serializers.Serializer):
    window = serializers.ChoiceField(choices=list(WINDOWS), required=False, allow_blank=True)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - {"window", "format"})
        if unknown:
            message = ["Unknown query parameter; this takes `window`."]
            raise serializers.ValidationError({name: message for name in unknown})
        for name in self.initial_data:
            if len(self.initial_data.getlist(name)) > 1:
                raise serializers.ValidationError({name: ["Give this parameter once."]})
        return attrs


class GpuHoursViewSet(viewsets.ViewSet):
    """Where the GPU-hours go: busy (SM-active weighted), allocated but idle, unallocated; per workload, node, rack."""

    schema = _OneObjectSchema()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "window", str, enum=list(WINDOWS), description="The window ending now (default 24h), in 60 steps."
            )
        ],
        responses={
            200: GpuHoursSerializer,
            503: OpenApiResponse(description="The telemetry could not be read; `detail` says why (e.g. Prometheus)."),
        },
    )
    def list(self, request):
        query = GpuHoursQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        name = query.validated_data.get("window") or gpuhours.DASHBOARD_WINDOW
        try:
            result = gpuhours.gpu_hours(window=Window.named(name))
        except TelemetryError as error:
            return Response({"detail": str(error)}, status=503)
        return Response(GpuHoursSerializer(GpuHoursSerializer.represent(name, result)).data)


class NodeBmcPowerViewSet(viewsets.GenericViewSet):
    """Power a node on, off, cycle or reset it through its BMC, or read its power (operators and admins): starts the
    `bmc-power` job and returns it (201). No BMC login for the node is a 400 naming `nodes`; off, cycle and reset
    are audited with who asked and the reason. Mounted under the node's URL (monitoring reaches BMCs; the
    inventory's node viewset may not import it)."""

    queryset = Node.objects.all()
    serializer_class = BmcPowerSerializer
    write_role = Role.OPERATOR

    @extend_schema(
        request=BmcPowerSerializer,
        responses={201: JobSerializer},
        parameters=[OpenApiParameter("public_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The node.")],
    )
    def create(self, request, public_id=None):
        node = get_object_or_404(Node, public_id=public_id)
        given = self.get_serializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        job = start_bmc_power(nodes=[node], action=data["action"], reason=data["reason"], requested_by=request.user)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)
