from django.db import transaction
from rest_framework import viewsets

from apps.accounts.choices import Role
from apps.inventory.api.views import UUID_PATTERN
from apps.remediation.api.serializers import RemediationDecisionSerializer, RemediationPolicySerializer
from apps.remediation.filters import RemediationDecisionFilterSet
from apps.remediation.models import RemediationDecision, RemediationPolicy


class RemediationPolicyViewSet(viewsets.ModelViewSet):
    """Remediation policies: per event kind and severity, what automation does (shadow or on) within its circuit
    breaker and attempt caps. Viewers read; operators and admins change them (audited)."""

    queryset = RemediationPolicy.objects.order_by("name", "pk")
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


class RemediationDecisionViewSet(viewsets.ReadOnlyModelViewSet):
    """What each policy did, or in shadow would have done, about each open event; refusals say why."""

    queryset = RemediationDecision.objects.select_related("event", "policy", "node", "training_job")
    serializer_class = RemediationDecisionSerializer
    filterset_class = RemediationDecisionFilterSet
    ordering_fields = ["decided_at"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
