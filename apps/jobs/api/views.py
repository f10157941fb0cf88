import uuid

from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.listing import sort_fields
from apps.core.openapi import paginated
from apps.jobs import services
from apps.jobs.api.serializers import (
    EventPageSerializer,
    JobCreateSerializer,
    JobSerializer,
    JobStepSerializer,
)
from apps.jobs.filters import JOB_COLUMNS, JobFilterSet
from apps.jobs.kinds import output_is_private
from apps.jobs.models import Artifact, Job, JobEvent, JobStep

EVENT_PAGE_MAX = 5000


class JobViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs: start one (operators), follow its events and matrix, cancel it."""

    queryset = Job.objects.all()
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    ordering_fields = sort_fields(JOB_COLUMNS)  # the job list page's columns
    search_fields = ["kind", "summary"]
    write_role = Role.OPERATOR

    def get_queryset(self):
        return (
            Job.objects.visible_to(self.request.user)
            .with_progress()
            .select_related("requested_by")
            .order_by("-created", "-id")
        )

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request, *args, **kwargs):
        incoming = JobCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        services.check_startable(kind=data["kind"])
        job = services.create_job(
            kind=data["kind"],
            targets=services.TargetSpec.of(data["targets"]),
            parameters=data.get("parameters") or {},
            transport=data.get("transport"),
            requested_by=request.user,
        )
        return Response(
            JobSerializer(self._annotated(job), context=self.get_serializer_context()).data,
            status=status.HTTP_201_CREATED,
        )

    def _annotated(self, job):
        return Job.objects.with_progress().select_related("requested_by").get(pk=job.pk)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, id=None):
        job = services.cancel_job(job=self.get_object(), user=request.user)
        return Response(JobSerializer(self._annotated(job), context=self.get_serializer_context()).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only events with a greater seq (default 0)."),
            OpenApiParameter("limit", int, description=f"At most this many (default and maximum {EVENT_PAGE_MAX})."),
            OpenApiParameter("hostname", str, description="Only events of this node."),
        ],
        responses={200: EventPageSerializer},
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def events(self, request, id=None):
        job = self.get_object()
        try:
            after = max(0, int(request.query_params.get("after", 0)))
            limit = min(EVENT_PAGE_MAX, max(1, int(request.query_params.get("limit", EVENT_PAGE_MAX))))
        except ValueError:
            return Response({"after": ["Give whole numbers for after and limit."]}, status=400)
        events = JobEvent.objects.filter(job=job, seq__gt=after).order_by("seq")
        if request.query_params.get("hostname"):
            events = events.filter(hostname=request.query_params["hostname"])
        page = list(events[: limit + 1])
        body = {
            "job_status": job.status,
            "last_seq": job.last_seq,
            "more": len(page) > limit,
            "events": page[:limit],
        }
        return Response(EventPageSerializer(body).data)

    @extend_schema(
        parameters=[OpenApiParameter("hostname", str, description="Only this node's cells.")],
        responses={200: JobStepSerializer(many=True)},
    )
    @paginated  # answers a page: the schema says so
    @action(detail=True, methods=["get"], filter_backends=[])
    def steps(self, request, id=None):
        job = self.get_object()
        steps = (
            JobStep.objects.filter(job=job)
            .prefetch_related(
                Prefetch(
                    "artifacts",
                    queryset=Artifact.objects.only(
                        "public_id", "step_id", "stream", "size_bytes", "stored_bytes", "cap_bytes"
                    ),
                )
            )
            .order_by("hostname", "position")
        )
        if request.query_params.get("hostname"):
            steps = steps.filter(hostname=request.query_params["hostname"])
        page = self.paginate_queryset(steps)
        serializer = JobStepSerializer(page, many=True, context={"job": job, "request": request})
        return self.get_paginated_response(serializer.data)

    @extend_schema(
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="The raw output.")},
    )
    @action(detail=True, methods=["get"], url_path=r"artifacts/(?P<artifact_id>[0-9a-f-]{36})", filter_backends=[])
    def artifact(self, request, id=None, artifact_id=None):
        job = self.get_object()
        try:
            uuid.UUID(artifact_id)  # the route takes 36 of [0-9a-f-]: `0000…` is no artifact (404), not a 400
        except ValueError:
            raise Http404("No such artifact.") from None
        artifact = get_object_or_404(Artifact.objects.select_related("step"), public_id=artifact_id, step__job=job)
        if output_is_private(job.kind) and not request.user.has_role(Role.OPERATOR):
            raise PermissionDenied(f"The output of {job.kind} jobs is file content from a node: operators read it.")
        response = HttpResponse(artifact.text(), content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{artifact.filename}"'
        response["X-Rackpilot-Size"] = str(artifact.size_bytes)
        if artifact.truncated:
            response["X-Rackpilot-Truncated"] = f"kept the first {artifact.stored_bytes} of {artifact.size_bytes} bytes"
        return response
