from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.benchmarks import services, timeline_jobs, timelines
from apps.benchmarks.api.serializers import (
    BenchmarkRunCreateSerializer,
    BenchmarkRunSerializer,
    BenchmarkTestSerializer,
    MeasurementReferenceSerializer,
    MeasurementSerializer,
    ReferenceSerializer,
    TimelineAnalysisSerializer,
    TimelineFromJobSerializer,
    TimelineFromNodesSerializer,
    TimelineSeriesSerializer,
    TimelineUploadSerializer,
)
from apps.benchmarks.filters import BENCHMARK_RUN_COLUMNS, BenchmarkRunFilterSet, TimelineAnalysisFilterSet
from apps.benchmarks.models import (
    BenchmarkRun,
    BenchmarkTest,
    Measurement,
    MeasurementReference,
    Reference,
    Round,
    Suspect,
    TimelineAnalysis,
)
from apps.core.listing import sort_fields
from apps.core.openapi import paginated
from apps.core.parsers import BoundedJSONParser
from apps.inventory.models import Node
from apps.jobs.api.serializers import JobSerializer
from apps.jobs.models import Job
from apps.jobs.services import TargetSpec

UUID_PATTERN = "[0-9a-f-]{36}"


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The run had already ended."
    default_code = "conflict"


class BenchmarkRunViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Benchmark runs: viewers read them and their tests; operators start runs and accept baselines."""

    queryset = BenchmarkRun.objects.select_related("requested_by", "accepted_by", "canceled_by").prefetch_related(
        Prefetch("nodes", queryset=Node.objects.only("hostname")),  # named only: 2,048 whole nodes cost ~40 ms
        Prefetch("suspects", queryset=Suspect.objects.select_related("node")),
        Prefetch("rounds", queryset=Round.objects.select_related("job")),
    )
    serializer_class = BenchmarkRunSerializer
    filterset_class = BenchmarkRunFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = UUID_PATTERN
    ordering_fields = sort_fields(BENCHMARK_RUN_COLUMNS)  # the benchmarks page's columns
    write_role = Role.OPERATOR

    def get_queryset(self):
        return super().get_queryset().visible_to(self.request.user).order_by("-created", "-id")

    @extend_schema(request=BenchmarkRunCreateSerializer, responses={201: BenchmarkRunSerializer})
    def create(self, request, *args, **kwargs):
        """Start a run; 400 names the field at fault and nothing is started."""
        data = BenchmarkRunCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        targets = TargetSpec(
            nodes=tuple(values.pop("nodes")), racks=tuple(values.pop("racks")), tags=tuple(values.pop("tags"))
        )
        run = services.start_run(targets=targets, requested_by=request.user, **values)
        return Response(BenchmarkRunSerializer(self.get_queryset().get(pk=run.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: BenchmarkTestSerializer(many=True)})
    @paginated  # answers a page: the schema says so
    @action(detail=True, methods=["get"])
    def results(self, request, id=None):
        """The run's tests in round order, each with every row of its series and its verdict."""
        tests = BenchmarkTest.objects.filter(run=self.get_object()).select_related("job", "round")
        page = self.paginate_queryset(tests.order_by("round__index", "launcher", "id"))
        return self.get_paginated_response(BenchmarkTestSerializer(page, many=True).data)

    @extend_schema(responses={200: MeasurementSerializer(many=True)})
    @paginated  # answers a page: the schema says so
    @action(detail=True, methods=["get"])
    def measurements(self, request, id=None):
        """The figures of an HPL-MxP, nvbandwidth or burn-in run, each with its series, verdict and evidence."""
        items = Measurement.objects.filter(run=self.get_object()).select_related("job", "round")
        page = self.paginate_queryset(items.order_by("round__index", "launcher", "case", "id"))
        return self.get_paginated_response(MeasurementSerializer(page, many=True).data)

    @extend_schema(
        request=None,
        responses={
            200: BenchmarkRunSerializer,
            409: OpenApiResponse(description="The run had already ended; nothing changed."),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, id=None):
        """Cancel the whole run: the current round's job is canceled and no further round starts; the run ends
        canceled with what it measured kept (it is `queued` or `running`, with `cancel_requested`, until then)."""
        run = self.get_object()
        try:
            services.cancel_run(run=run, user=request.user)
        except services.RunFinished as error:
            raise Conflict(str(error)) from None
        return Response(BenchmarkRunSerializer(self.get_queryset().get(pk=run.pk)).data)

    @extend_schema(request=None, responses={200: BenchmarkRunSerializer})
    @action(detail=True, methods=["post"])
    def accept(self, request, id=None):
        """Make the run's figures the baselines of their scopes."""
        run = self.get_object()
        services.accept_baseline(run=run, user=request.user)
        return Response(BenchmarkRunSerializer(self.get_queryset().get(pk=run.pk)).data)


class ReferenceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, viewsets.GenericViewSet
):
    """Expected values per SKU and fabric in three tiers; operators edit them."""

    queryset = Reference.objects.order_by("sku_name", "scope", "fabric", "collective")
    serializer_class = ReferenceSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    write_role = Role.OPERATOR


class MeasurementReferenceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, viewsets.GenericViewSet
):
    """Expected HPL-MxP, nvbandwidth and burn-in figures per SKU in three tiers; operators edit them."""

    queryset = MeasurementReference.objects.order_by("sku_name", "suite", "case")
    serializer_class = MeasurementReferenceSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    write_role = Role.OPERATOR


class TimelineAnalysisViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Timeline analyses: compute, communication, overlap and idle time per step and per rank. Viewers read them;
    operators upload traces (multipart) or take them from a training job."""

    queryset = TimelineAnalysis.objects.select_related("training_job", "job", "requested_by")
    serializer_class = TimelineAnalysisSerializer
    filterset_class = TimelineAnalysisFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = UUID_PATTERN
    parser_classes = [MultiPartParser, FormParser, BoundedJSONParser]
    write_role = Role.OPERATOR

    def get_queryset(self):
        return super().get_queryset().visible_to(self.request.user).order_by("-created", "-id")

    @extend_schema(
        request={"multipart/form-data": TimelineUploadSerializer},
        responses={
            201: TimelineAnalysisSerializer,
            202: JobSerializer,
            400: OpenApiResponse(
                description="The field at fault, the file, "
                "and the line and offset where the trace stopped being one; nothing is stored."
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        """Upload traces and store their breakdown; 400 names the field (and the file's line and offset). Large
        uploads (8 MiB and over) answer 202 with the `timeline-analysis` job that analyses them: its events show
        the progress, and its last event names the stored analysis (or why a file was refused)."""
        data = TimelineUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        uploads = [(upload.name, upload) for upload in data.validated_data["files"]]
        if timeline_jobs.is_large(uploads):
            name, user = data.validated_data["name"], request.user
            return _accepted(request, timeline_jobs.start_analysis(files=uploads, name=name, requested_by=user))
        analysis = timelines.analyse_upload(files=uploads, name=data.validated_data["name"], requested_by=request.user)
        return Response(TimelineAnalysisSerializer(self.get_queryset().get(pk=analysis.pk)).data, status=201)

    @extend_schema(
        request=TimelineFromJobSerializer,
        responses={
            202: JobSerializer,
            400: OpenApiResponse(description="The field at fault; nothing is started."),
        },
    )
    @action(detail=False, methods=["post"], url_path="from-training-job", parser_classes=[BoundedJSONParser])
    def from_training_job(self, request):
        """Profile a (simulated) training job's ranks for some steps: 202 with the `timeline-analysis` job that does
        it (Location: the job in the API). Its events show the progress; once it has succeeded, its last event and
        `GET /api/benchmark-timelines/?job=<id>` name the stored analysis."""
        data = TimelineFromJobSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = timeline_jobs.start_profile(
            training_job=data.validated_data["training_job"],
            steps=data.validated_data["steps"],
            requested_by=request.user,
        )
        return _accepted(request, job)

    @extend_schema(
        request=TimelineFromNodesSerializer,
        responses={201: JobSerializer, 400: OpenApiResponse(description="The field at fault; nothing is started.")},
    )
    @action(detail=False, methods=["post"], url_path="from-nodes", parser_classes=[BoundedJSONParser])
    def from_nodes(self, request):
        """Read trace files off the nodes a run wrote them on (a timeline-trace job); the analysis is stored, with
        its `job`, once every file has been read."""
        data = TimelineFromNodesSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = timelines.take_from_nodes(
            files=[dict(file) for file in data.validated_data["files"]],
            name=data.validated_data["name"],
            training_job=data.validated_data["training_job"],
            transport=data.validated_data["transport"],
            requested_by=request.user,
        )
        job = Job.objects.with_progress().select_related("requested_by").get(pk=job.pk)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=201)

    @extend_schema(responses={200: TimelineSeriesSerializer})
    @action(detail=True, methods=["get"])
    def series(self, request, id=None):
        """Each rank with its steps: compute, communication, overlap and idle time (µs)."""
        analysis = self.get_object()
        return Response({"analysis": analysis.public_id, "ranks": analysis.series.get("ranks", [])})


def _accepted(request, job: Job) -> Response:
    """202 with a timeline-analysis job, its API address in Location."""
    job = Job.objects.with_progress().select_related("requested_by").get(pk=job.pk)
    body = JobSerializer(job, context={"request": request}).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})
