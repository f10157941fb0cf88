import uuid

from django.db import transaction
from django_filters import rest_framework as filters
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.inventory.api.views import UUID_PATTERN
from apps.inventory.filters import node_ref
from apps.jobs.api.serializers import JobSerializer
from apps.monitoring import gpuhours, health, services
from apps.monitoring.api.serializers import (
    BmcReadingSerializer,
    BmcSerializer,
    CostPolicySerializer,
    FleetHealthSerializer,
    GpuHoursSerializer,
    PolicyActionRefSerializer,
    PolicyActionSerializer,
    SloSerializer,
    SloStatusSerializer,
)
from apps.monitoring.choices import ActionState
from apps.monitoring.models import Bmc, BmcReading, CostPolicy, PolicyAction, Slo
from apps.monitoring.policies import services as policies
from apps.monitoring.telemetry import WINDOWS, TelemetryError, Window


class BmcFilterSet(filters.FilterSet):
    node = node_ref()

    class Meta:
        model = Bmc
        fields = ["node", "protocol", "last_result"]


class BmcViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Nodes' BMC settings: viewers read, operators write; the password is write-only."""

    queryset = Bmc.objects.select_related("node").order_by("node__hostname", "pk")
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
        rows = BmcReading.objects.latest_per_sensor(bmc.node)
        for row in rows:
            row.node = bmc.node
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


# --- cost and energy policies ----------------------------------------------------------------------------------------

POLICY_ERRORS = {400: OpenApiResponse(description="Refused: the field at fault and why; nothing changed.")}


def _refused(error: policies.PolicyError) -> Response:
    return Response({field: [message] for field, message in error.errors.items()}, status=400)


class CostPolicyViewSet(viewsets.ModelViewSet):
    """Cost and energy policies. Viewers read; operators define them, dry-run, approve, apply and revert their
    actions; only an admin gives standing approval."""

    queryset = CostPolicy.objects.select_related("rack", "service", "created_by").order_by("name", "pk")
    serializer_class = CostPolicySerializer
    filterset_fields = ["kind", "scope", "state", "standing_approval"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    @transaction.atomic
    def perform_create(self, serializer):
        serializer.save()

    @transaction.atomic
    def perform_update(self, serializer):
        serializer.save()

    def _action(self, policy, data, states, what: str):
        ref = PolicyActionRefSerializer(data=data)
        ref.is_valid(raise_exception=True)
        actions = policy.actions.filter(state__in=states)
        if ref.validated_data.get("action"):
            found = policy.actions.filter(public_id=ref.validated_data["action"]).first()
            if found is None:
                raise policies.PolicyError({"action": "No such action of this policy."})
            return found, ref.validated_data
        found = actions.first()
        if found is None:
            raise policies.PolicyError({"action": f"No action of this policy to {what}."})
        return found, ref.validated_data

    @extend_schema(request=None, responses={201: PolicyActionSerializer, **POLICY_ERRORS})
    @action(detail=True, methods=["post"], url_path="dry-run")
    def dry_run(self, request, public_id=None):
        """What the policy would do now and the expected saving, from the telemetry; recorded as a proposal."""
        try:
            created = policies.dry_run(policy=self.get_object(), user=request.user)
        except policies.PolicyError as error:
            return _refused(error)
        return Response(PolicyActionSerializer(created).data, status=201)

    @extend_schema(request=None, responses={201: JobSerializer, **POLICY_ERRORS})
    @action(detail=True, methods=["post"])
    def survey(self, request, public_id=None):
        """Storage tiering: list the idle and the open files on the node (a job, read-only); the proposal is
        recorded when it succeeds."""
        try:
            job = policies.survey(policy=self.get_object(), user=request.user)
        except policies.PolicyError as error:
            return _refused(error)
        return Response(JobSerializer(job).data, status=201)

    def _step(self, request, states, what, run):
        policy = self.get_object()
        try:
            found, data = self._action(policy, request.data, states, what)
            done = run(found, data)
        except policies.PolicyError as error:
            return _refused(error)
        return Response(PolicyActionSerializer(done).data)

    @extend_schema(request=PolicyActionRefSerializer, responses={200: PolicyActionSerializer, **POLICY_ERRORS})
    @action(detail=True, methods=["post"])
    def approve(self, request, public_id=None):
        """Approve a proposal (default: the newest): exactly the commands it shows."""
        return self._step(
            request, [ActionState.PROPOSED], "approve", lambda a, _: policies.approve(action=a, user=request.user)
        )

    @extend_schema(request=PolicyActionRefSerializer, responses={200: PolicyActionSerializer, **POLICY_ERRORS})
    @action(detail=True, methods=["post"])
    def apply(self, request, public_id=None):
        """Run an approved action (default: the newest) as a power-limit job; refused while a latency SLO burns."""
        return self._step(
            request, [ActionState.APPROVED], "apply", lambda a, _: policies.apply(action=a, user=request.user)
        )

    @extend_schema(request=PolicyActionRefSerializer, responses={200: PolicyActionSerializer, **POLICY_ERRORS})
    @action(detail=True, methods=["post"])
    def revert(self, request, public_id=None):
        """Put the defaults back on an applied action's nodes (default: the newest applied) as a power-limit job."""
        return self._step(
            request,
            [ActionState.APPLIED, ActionState.FAILED],
            "revert",
            lambda a, data: policies.revert(action=a, user=request.user, reason=data.get("reason", "")),
        )


class PolicyActionFilterSet(filters.FilterSet):
    policy = filters.CharFilter(method="by_policy", label="Policy name or public id")

    class Meta:
        model = PolicyAction
        fields = ["policy", "state", "trigger"]

    def by_policy(self, queryset, name, value):
        try:
            return queryset.filter(policy__public_id=uuid.UUID(value))
        except ValueError:
            return queryset.filter(policy__name=value)


class PolicyActionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every action a cost policy proposed, with its commands, saving, approval and run history."""

    queryset = PolicyAction.objects.select_related("policy", "apply_job", "revert_job").order_by("-created", "-pk")
    serializer_class = PolicyActionSerializer
    filterset_class = PolicyActionFilterSet
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN


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
