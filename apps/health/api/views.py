from django.db import transaction
from django.utils import timezone
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.health import services
from apps.health.api.serializers import (
    ClearSerializer,
    HealthEventSerializer,
    ReliabilityQuerySerializer,
    ReliabilitySerializer,
)
from apps.health.choices import ClearedBy
from apps.health.costs import RELIABILITY_DEFAULT, RELIABILITY_WINDOWS, failure_costs, reliability
from apps.health.filters import HealthEventFilterSet
from apps.health.models import HealthEvent
from apps.inventory.api.views import UUID_PATTERN


class HealthEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Health events on the fleet's components, worst and newest first; operators clear them with a reason."""

    queryset = HealthEvent.objects.select_related("node", "gpu", "nic", "cable", "switch", "cleared_by_user")
    serializer_class = HealthEventSerializer
    filterset_class = HealthEventFilterSet
    ordering_fields = ["first_seen", "last_seen", "count", "kind", "source"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    def get_queryset(self):
        return super().get_queryset().worst_first()

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        costs = failure_costs(page, now=timezone.now())  # the page's costs in one pass, not one pass per row
        serializer = self.get_serializer(page, many=True, context={**self.get_serializer_context(), "costs": costs})
        return self.get_paginated_response(serializer.data)

    @extend_schema(
        request=ClearSerializer,
        responses={
            200: HealthEventSerializer,
            400: OpenApiResponse(description="`reason` missing, or `event`: the event is cleared already."),
        },
    )
    @action(detail=True, methods=["post"])
    def clear(self, request, public_id=None):
        """Clear an open event as an operator, with the reason (audited); a fault seen again opens a new event."""
        event = self.get_object()
        body = ClearSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            event = services.clear_event(
                event=event, by=ClearedBy.OPERATOR, reason=body.validated_data["reason"], user=request.user
            )
        return Response(HealthEventSerializer(self.get_queryset().get(pk=event.pk)).data)


class _OneObjectSchema(AutoSchema):
    """The schema of a `list` route that answers one object (not an array)."""

    def _is_list_view(self, serializer=None) -> bool:
        return False


class ReliabilityViewSet(viewsets.ViewSet):
    """MTBF per component type and the lemons (the nodes and parts whose failures cost the most GPU-hours)."""

    schema = _OneObjectSchema()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "window",
                str,
                enum=list(RELIABILITY_WINDOWS),
                description=f"Ending now; {RELIABILITY_DEFAULT} if left out.",
            )
        ],
        responses={200: ReliabilitySerializer, 400: OpenApiResponse(description="`window`: not one of the choices.")},
    )
    def list(self, request):
        query = ReliabilityQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        window = query.validated_data.get("window") or RELIABILITY_DEFAULT
        return Response(ReliabilitySerializer(reliability(window=window, now=timezone.now())).data)
