import uuid

from django.db import transaction
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.filters import FilterSet
from apps.costs import services as policies
from apps.costs.api.serializers import CostPolicySerializer, PolicyActionRefSerializer, PolicyActionSerializer
from apps.costs.choices import ActionState
from apps.costs.models import CostPolicy, PolicyAction
from apps.inventory.api.views import UUID_PATTERN
from apps.jobs.api.serializers import JobSerializer

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
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=201)

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


class PolicyActionFilterSet(FilterSet):
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
