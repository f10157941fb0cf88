from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.listing import sort_fields
from apps.core.parsers import BoundedJSONParser
from apps.diagnosis import rehearsal, services
from apps.diagnosis.api.serializers import (
    DryRunSerializer,
    IncidentCreateSerializer,
    IncidentDetailSerializer,
    IncidentSerializer,
    RehearsalCreateSerializer,
    TriageResultSerializer,
    TriageTextSerializer,
    TriageUploadSerializer,
)
from apps.diagnosis.filters import INCIDENT_COLUMNS, IncidentFilterSet
from apps.diagnosis.models import Evidence, Hypothesis, Incident, Remediation
from apps.jobs.api.serializers import JobSerializer

UUID_PATTERN = r"[0-9a-fA-F-]{36}"


class TriageViewSet(viewsets.ViewSet):
    """Log triage: POST a log, get the problems it shows with the lines they come from. Reads only (viewers too)."""

    parser_classes = [BoundedJSONParser, MultiPartParser, FormParser]
    write_role = Role.VIEWER  # the POST stores nothing

    @extend_schema(
        request={"application/json": TriageTextSerializer, "multipart/form-data": TriageUploadSerializer},
        responses={
            200: TriageResultSerializer,
            400: OpenApiResponse(description="Empty, binary or oversized input; the body names the field."),
        },
    )
    def create(self, request):
        """Triage {"text": ...} or a multipart `file`; an unrecognised log answers 200 with no findings."""
        limit = services.max_bytes()
        _refuse_oversized_body(request, limit)  # before the body is read
        try:
            data = request.data
        except RequestDataTooBig:  # past what Django reads into memory (files are not counted: it is the text)
            limit_bytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            raise ValidationError(
                {"text": [f"The text is over the {limit_bytes} bytes a request may carry; upload the log as a file."]}
            ) from None
        if not hasattr(data, "get"):  # a JSON list or number: not the object the schema documents
            raise ValidationError({"non_field_errors": ['Send {"text": ...} or a multipart file.']})
        try:
            source, log = services.read_submission(text=data.get("text"), upload=request.FILES.get("file"), limit=limit)
        except services.TriageInputError as error:
            raise ValidationError({error.field: [error.message]}) from None
        result = services.triage_text(text=log, source=source)
        return Response(TriageResultSerializer(result.to_dict()).data)


# Room for the multipart envelope; JSON may write one byte of text as up to six (a \u escape).
ENVELOPE_BYTES = 64 << 10
JSON_EXPANSION = 6


def _refuse_oversized_body(request, limit: int) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    multipart = request.content_type.startswith("multipart/")
    allowed = (limit if multipart else JSON_EXPANSION * limit) + ENVELOPE_BYTES
    if length > allowed:
        field = "file" if multipart else "text"
        raise ValidationError({field: [f"The request is {length} bytes; a log may be at most {limit} bytes."]})


# --- incidents ---------------------------------------------------------------------------------------------------


class IncidentViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Incidents: open one for a failing training job or a node, follow runbook 1's evidence and ranking, approve
    its fix. Viewers read; operators open, start and approve."""

    serializer_class = IncidentSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = UUID_PATTERN
    filterset_class = IncidentFilterSet
    ordering_fields = sort_fields(INCIDENT_COLUMNS)  # the incident list page's columns
    write_role = Role.OPERATOR

    def get_queryset(self):
        queryset = Incident.objects.select_related(
            "training_job", "node", "recurrence_of", "opened_by"
        ).prefetch_related("suspect_nodes", "jobs")
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(
                Prefetch("evidence", queryset=Evidence.objects.select_related("job", "artifact")),
                Prefetch(
                    "hypotheses",
                    queryset=Hypothesis.objects.prefetch_related(
                        Prefetch("supporting", queryset=Evidence.objects.only("id", "seq")),
                        Prefetch("contradicting", queryset=Evidence.objects.only("id", "seq")),
                    ),
                ),
                "ranking_changes",
                Prefetch(
                    "remediations",
                    queryset=Remediation.objects.select_related("approved_by", "fix_job", "verify_job"),
                ),
            )
        return queryset.order_by("-created", "-id")

    def get_serializer_class(self):
        return IncidentDetailSerializer if self.action == "retrieve" else IncidentSerializer

    def _fresh(self, incident, code=status.HTTP_200_OK) -> Response:
        self.action = "retrieve"
        return Response(
            IncidentDetailSerializer(
                self.get_queryset().get(pk=incident.pk), context=self.get_serializer_context()
            ).data,
            status=code,
        )

    @extend_schema(request=IncidentCreateSerializer, responses={201: IncidentDetailSerializer})
    def create(self, request, *args, **kwargs):
        incoming = IncidentCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        with transaction.atomic():
            try:
                incident = services.open_incident(
                    user=request.user,
                    training_job=data.get("training_job"),
                    node=data.get("node"),
                    title=data["title"],
                    symptom=data["symptom"],
                    transport=data["transport"],
                    runbook=data["runbook"],
                )
                if data["start"]:
                    services.start_runbook(
                        incident=incident, user=request.user, sample_seconds=data.get("sample_seconds")
                    )
            except services.IncidentError as error:
                raise ValidationError(error.errors) from None
        return self._fresh(incident, status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: JobSerializer, 400: OpenApiResponse(description="Already running.")})
    @action(detail=True, methods=["post"])
    def runbook(self, request, id=None):
        """Start runbook 1 (again) on this incident; answers its first job."""
        incident = self.get_object()
        try:
            job = services.start_runbook(incident=incident, user=request.user)
        except services.IncidentError as error:
            raise ValidationError({error.field: [error.message]}) from None
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: DryRunSerializer(many=True)})
    @action(detail=True, methods=["get"], url_path="dry-run")
    def dry_run(self, request, id=None):
        """The proposed fixes as they would run: the exact command on each node. Nothing runs."""
        incident = self.get_object()
        return Response(
            [
                {"remediation": remediation.public_id, "commands": services.dry_run(remediation=remediation)}
                for remediation in incident.remediations.all()
            ]
        )

    @extend_schema(
        request=None,
        responses={201: JobSerializer, 400: OpenApiResponse(description="Not waiting for approval.")},
    )
    @action(detail=True, methods=["post"], url_path=r"remediations/(?P<remediation>[0-9a-fA-F-]{36})/approve")
    def approve(self, request, id=None, remediation=None):
        """Approve a proposed fix (operators): it runs through the jobs engine, then the runbook re-checks."""
        incident = self.get_object()
        found = incident.remediations.filter(public_id=remediation).first()
        if found is None:
            raise NotFound("No such fix on this incident.")
        try:
            job = services.approve_remediation(remediation=found, user=request.user)
        except services.IncidentError as error:
            raise ValidationError({error.field: [error.message]}) from None
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=RehearsalCreateSerializer,
        responses={
            201: IncidentDetailSerializer,
            400: OpenApiResponse(description="No such fault, or one that hurts no training job; names the field."),
        },
    )
    @action(detail=False, methods=["post"])
    def rehearsals(self, request):
        """Rehearse the runbook of a fault injected on the simulator (operators), as the simulator page does: the
        fault's runbook on a training job it hurts, marked as a rehearsal."""
        incoming = RehearsalCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            incident = rehearsal.rehearse(fault=incoming.validated_data["fault"], user=request.user)
        except services.IncidentError as error:
            raise ValidationError({error.field: [error.message]}) from None
        return self._fresh(incident, status.HTTP_201_CREATED)
