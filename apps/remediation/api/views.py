from datetime import timedelta

from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.inventory.api.views import UUID_PATTERN
from apps.inventory.models import Gpu
from apps.jobs.api.serializers import JobSerializer
from apps.remediation import repairs, windows
from apps.remediation.api.serializers import (
    BACKTEST_WINDOWS,
    BacktestOptionsSerializer,
    BacktestReportSerializer,
    BacktestRequestSerializer,
    CloseSerializer,
    GateSerializer,
    MaintenanceWindowSerializer,
    NoteSerializer,
    OpenRepairSerializer,
    PartSerializer,
    RecordPartSerializer,
    RemediationDecisionSerializer,
    RemediationPolicySerializer,
    RepairSerializer,
)
from apps.remediation.backtest import BacktestRefused, backtest
from apps.remediation.filters import MaintenanceWindowFilterSet, RemediationDecisionFilterSet
from apps.remediation.models import (
    MaintenanceWindow,
    PartReplacement,
    RemediationDecision,
    RemediationPolicy,
    Repair,
    RepairGate,
)


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


class MaintenanceWindowViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Maintenance windows on a rack or a node: automation leaves their nodes to the people working on them and
    defers non-critical actions into the next one (docs/health.md). Viewers read; operators and admins book, end and
    delete them (audited). To move one, delete it and book another: what was deferred into it is decided again."""

    queryset = MaintenanceWindow.objects.select_related("rack", "node").prefetch_related("deferred_decisions")
    serializer_class = MaintenanceWindowSerializer
    filterset_class = MaintenanceWindowFilterSet
    ordering_fields = ["starts"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    @transaction.atomic
    def perform_create(self, serializer):
        serializer.instance = windows.book(**serializer.validated_data)

    @transaction.atomic
    def perform_destroy(self, instance):
        instance.delete()

    @extend_schema(request=None, responses={200: MaintenanceWindowSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"])
    def end(self, request, public_id=None):
        """End an open window now: automation acts on its nodes again. One not open yet is deleted instead."""
        window = windows.end_early(window=self.get_object(), now=timezone.now())
        return Response(self.get_serializer(window).data)


class RepairViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Repairs: a node's evidence, parts and the validation its fault chose, until it returns through the scheduler.
    Viewers read; operators open one and act on it (each action audited); a refusal is a 400 naming the field."""

    queryset = Repair.objects.select_related("node", "opened_by", "closed_by").prefetch_related(
        "events",
        "decisions",
        Prefetch("parts", PartReplacement.objects.select_related("node", "repair", "replaced_by")),
        Prefetch("gates", RepairGate.objects.prefetch_related("runs")),
    )
    serializer_class = RepairSerializer
    filterset_fields = ["state", "gate_kind"]
    ordering_fields = ["opened_at"]
    lookup_field = "public_id"
    lookup_value_regex = UUID_PATTERN
    write_role = Role.OPERATOR

    def _answer(self, repair: Repair, status: int = 200) -> Response:
        return Response(self.get_serializer(self.get_queryset().get(pk=repair.pk)).data, status=status)

    @extend_schema(request=OpenRepairSerializer, responses={201: RepairSerializer, 400: OpenApiResponse()})
    def create(self, request):
        """Open a repair of a node by hand (or join its active one)."""
        body = OpenRepairSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        repair = repairs.open_repair(
            node=body.validated_data["node"], reason=body.validated_data["reason"], user=request.user
        )
        return self._answer(repair, 201)

    @extend_schema(
        parameters=[
            OpenApiParameter("serial", str, required=True, pattern=r"\S", description="The part's serial (not blank).")
        ],
        responses={200: PartSerializer(many=True), 400: OpenApiResponse()},
    )
    @action(detail=False, methods=["get"], url_path="part-history", pagination_class=None, filter_backends=[])
    def part_history(self, request):
        """Every replacement a serial was part of, oldest first: the nodes and repairs the part went through."""
        serial = (request.query_params.get("serial") or "").strip()
        if not serial:
            raise ValidationError({"serial": ["Name the serial."]})
        return Response(PartSerializer(repairs.part_history(serial), many=True).data)

    @extend_schema(request=None, responses={201: JobSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"], url_path="capture-evidence")
    def capture_evidence(self, request, public_id=None):
        """Start the evidence job (bug report, kernel log) on the node; no reboot before it is in."""
        job = repairs.capture_evidence(repair=self.get_object(), user=request.user)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data, status=201)

    @extend_schema(request=NoteSerializer, responses={200: RepairSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"], url_path="start-work")
    def start_work(self, request, public_id=None):
        repair = self.get_object()
        body = NoteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._answer(repairs.start_work(repair=repair, user=request.user, **body.validated_data))

    @extend_schema(request=RecordPartSerializer, responses={201: PartSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"], url_path="parts")
    def record_part(self, request, public_id=None):
        """Record a part replaced, by serial (a GPU's new serial is written on the inventory's GPU)."""
        repair = self.get_object()
        body = RecordPartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        index = data.pop("gpu_index", None)
        gpu = Gpu.objects.filter(node=repair.node, index=index).first() if index is not None else None
        if index is not None and gpu is None:
            raise ValidationError({"gpu_index": [f"{repair.node.hostname} has no GPU {index}."]})
        with transaction.atomic():
            part = repairs.record_part(repair=repair, gpu=gpu, user=request.user, **data)
        return Response(PartSerializer(part).data, status=201)

    @extend_schema(request=NoteSerializer, responses={201: GateSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"], url_path="start-validation")
    def start_validation(self, request, public_id=None):
        """Start the validation the fault chose, with the work done as an optional note ("Repaired: validate now");
        a gate that cannot start is a 400 saying why, nothing changed."""
        repair = self.get_object()
        body = NoteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        gate = repairs.start_validation(repair=repair, user=request.user, **body.validated_data)
        return Response(GateSerializer(gate).data, status=201)

    @extend_schema(request=None, responses={200: RepairSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"], url_path="return")
    def return_to_service(self, request, public_id=None):
        """Resume the node through the scheduler, only after a passed validation: the repair is `returning` until the
        scheduler's job ends (returned, or back to `validating` with why when the scheduler did not resume it)."""
        return self._answer(repairs.return_to_service(repair=self.get_object(), user=request.user))

    @extend_schema(request=CloseSerializer, responses={200: RepairSerializer, 400: OpenApiResponse()})
    @action(detail=True, methods=["post"])
    def close(self, request, public_id=None):
        """End the repair without a return (the node stays drained), with a note."""
        repair = self.get_object()  # a bad id is a 404 whatever the body
        body = CloseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._answer(repairs.close_repair(repair=repair, user=request.user, note=body.validated_data["note"]))
