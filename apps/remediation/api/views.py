from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.inventory.api.views import UUID_PATTERN
from apps.remediation.api.serializers import (
    BACKTEST_WINDOWS,
    BacktestOptionsSerializer,
    BacktestReportSerializer,
    BacktestRequestSerializer,
    RemediationDecisionSerializer,
    RemediationPolicySerializer,
)
from apps.remediation.backtest import BacktestRefused, backtest
from apps.remediation.filters import RemediationDecisionFilterSet
from apps.remediation.models import RemediationDecision, RemediationPolicy


class RemediationPolicyViewSet(viewsets.ModelViewSet):
    """Remediation policies: per event kind and severity, what automation does (shadow or on) within its circuit
    breaker and attempt caps. Viewers read; operators and admins change them (audited)."""

    queryset = RemediationPolicy.objects.prefetch_related("canary_racks").order_by("name", "pk")
    serializer_class = RemediationPolicySerializer
    filterset_fields = ["action", "mode", "enabled"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    @transaction.atomic
    def perform_create(self, serializer):
        serializer.save()

    @transaction.atomic
    def perform_update(self, serializer):
        serializer.save()

    @extend_schema(
        request=BacktestRequestSerializer,
        responses={
            200: BacktestReportSerializer,
            400: OpenApiResponse(description="A bad field, named: the candidate's, `policy`, `window` or `seed`."),
        },
    )
    @action(detail=False, methods=["post"])
    def backtest(self, request):
        """Replay the window's recorded events (and, with `campaign`, a simulated fault campaign) through the
        evaluator for the policies in force and with the candidate in; nothing is saved (docs/health.md)."""
        options = BacktestOptionsSerializer(data=request.data)
        policy = options.validated_data.get("policy") if options.is_valid() else None
        body = BacktestRequestSerializer(policy, data=request.data, partial=policy is not None)
        body.is_valid(raise_exception=True)
        options.is_valid(raise_exception=True)  # valid once the whole body is: its defaults applied
        settings = options.validated_data
        fields = {k: v for k, v in body.validated_data.items() if k not in BacktestOptionsSerializer.OPTIONS}
        racks = fields.pop("canary_racks", None)
        candidate = RemediationPolicy.objects.get(pk=policy.pk) if policy else RemediationPolicy()
        for name, value in fields.items():
            setattr(candidate, name, value)
        if racks is None and policy is not None:
            racks = list(policy.canary_racks.all())
        now = timezone.now()
        try:
            report = backtest(
                [candidate],
                since=now - timedelta(days=BACKTEST_WINDOWS[settings["window"]]),
                until=now,
                campaign=settings["seed"] if settings["campaign"] else None,
                canary_racks={0: racks} if racks else None,
            )
        except BacktestRefused as refused:
            raise serializers.ValidationError({"window": [m for ms in refused.errors.values() for m in ms]}) from None
        return Response(BacktestReportSerializer(report).data)


class RemediationDecisionViewSet(viewsets.ReadOnlyModelViewSet):
    """What each policy did, or in shadow would have done, about each open event; refusals say why."""

    queryset = RemediationDecision.objects.select_related("event", "policy", "node", "training_job")
    serializer_class = RemediationDecisionSerializer
    filterset_class = RemediationDecisionFilterSet
    ordering_fields = ["decided_at"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
