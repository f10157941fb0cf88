"""The deployments API: create and edit a plan, read its dry run and artefacts, approve, start, resume, follow its
matrix and verdicts, decide suggestions, download the acceptance report."""

from django.db.models import Count
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.accounts.choices import Role
from apps.core.listing import sort_fields
from apps.deployments import cluster, report, services
from apps.deployments.api.serializers import (
    AcceptanceCriterionSerializer,
    ApprovalSerializer,
    ApproveSerializer,
    ClusterCheckSerializer,
    DeploymentCreateSerializer,
    DeploymentSerializer,
    DeploymentUpdateSerializer,
    StartSerializer,
    SuggestionSerializer,
    VerdictSerializer,
)
from apps.deployments.context import StoredPlanInvalid
from apps.deployments.filters import (
    DEPLOYMENT_COLUMNS,
    AcceptanceCriterionFilterSet,
    DeploymentFilterSet,
    SuggestionFilterSet,
)
from apps.deployments.models import AcceptanceCriterion, Deployment, Suggestion
from apps.jobs import services as job_services

UUID_PATTERN = r"[0-9a-fA-F-]{36}"


class DeploymentViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Deployments: plans that bring nodes to production, with their runs, verdicts and suggestions."""

    queryset = Deployment.objects.all()
    serializer_class = DeploymentSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = UUID_PATTERN
    ordering_fields = sort_fields(DEPLOYMENT_COLUMNS)  # the deployment list page's columns
    search_fields = ["name", "description"]
    filterset_class = DeploymentFilterSet
    write_role = Role.OPERATOR

    def get_queryset(self):
        return (
            Deployment.objects.visible_to(self.request.user)
            .select_related("created_by", "approved_by")
            .prefetch_related("nodes", "runs__job", "runs__started_by")
            .annotate(node_count=Count("nodes", distinct=True))  # `ordering=node_count`: the list page sorts by it
            .order_by("-created", "-id")
        )

    def _fresh(self, deployment) -> Response:
        return Response(DeploymentSerializer(self.get_queryset().get(pk=deployment.pk)).data)

    @extend_schema(request=DeploymentCreateSerializer, responses={201: DeploymentSerializer})
    def create(self, request, *args, **kwargs):
        incoming = DeploymentCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        deployment = services.create_deployment(
            name=data["name"],
            description=data.get("description", ""),
            targets=job_services.TargetSpec.of(data["targets"]),
            user=request.user,
            option_edits=data.get("options") or {},
            criteria_edits=data.get("criteria") or {},
            transport=data.get("transport") or "",
        )
        response = self._fresh(deployment)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=DeploymentUpdateSerializer, responses={200: DeploymentSerializer})
    def partial_update(self, request, *args, **kwargs):
        deployment = self.get_object()
        incoming = DeploymentUpdateSerializer(data=request.data, partial=True, context={"deployment": deployment})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        deployment = services.update_deployment(
            deployment=deployment,
            targets=job_services.TargetSpec.of(data["targets"]) if "targets" in data else None,
            option_edits=data.get("options"),
            criteria_edits=data.get("criteria"),
            stage=data.get("stage"),
            description=data.get("description"),
        )
        return self._fresh(deployment)

    @extend_schema(request=None, responses={200: OpenApiResponse(description="Per node, per step: the commands.")})
    @action(detail=True, methods=["get"])
    def plan(self, request, id=None):
        """The dry run: per node and step, the commands check/verify read and the commands apply may run."""
        deployment = self.get_object()
        try:
            plan = services.dry_run(deployment)
        except StoredPlanInvalid as error:
            return _stored_plan_conflict(error)
        return Response(
            {
                "nodes": plan,
                "disruptive": services.disruptive_commands(deployment, plan),
                "criteria": deployment.criteria,
            }
        )

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("name", str, description="Download this artefact's file (e.g. nccl-conf).")],
        responses={200: OpenApiResponse(description="Generated, validated artefacts.")},
    )
    @action(detail=True, methods=["get"], filter_backends=[])  # its `name` is an artefact's, not the list's filter
    def artefacts(self, request, id=None):
        """The files the plan generates (NCCL environment, cgroup slice, scheduler configuration ...), validated."""
        name = request.query_params.get("name") or None
        try:
            artefacts = services.plan_artefacts(self.get_object(), only=name)
        except StoredPlanInvalid as error:
            return _stored_plan_conflict(error)
        if name:
            if not artefacts:
                return Response({"name": ["No such artefact."]}, status=status.HTTP_404_NOT_FOUND)
            response = HttpResponse(artefacts[0].content, content_type=artefacts[0].media_type)
            response["Content-Disposition"] = f'attachment; filename="{artefacts[0].filename.rsplit("/", 1)[-1]}"'
            return response
        return Response(
            [
                {
                    "name": a.name,
                    "filename": a.filename,
                    "media_type": a.media_type,
                    "description": a.description,
                    "content": a.content,
                }
                for a in artefacts
            ]
        )

    @extend_schema(request=ApproveSerializer, responses={200: DeploymentSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, id=None):
        """Sign off the plan (operators): optionally its disruptive steps too, on the nodes and commands shown."""
        incoming = ApproveSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        deployment = services.approve(
            deployment=self.get_object(), user=request.user, steps=incoming.validated_data["steps"]
        )
        return self._fresh(deployment)

    @extend_schema(request=StartSerializer, responses={202: DeploymentSerializer})
    @action(detail=True, methods=["post"])
    def start(self, request, id=None):
        """Run the approved plan on every node (`check_only`: read and judge, apply nothing)."""
        incoming = StartSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        run = services.start(
            deployment=self.get_object(), user=request.user, check_only=incoming.validated_data["check_only"]
        )
        response = self._fresh(run.deployment)
        response.status_code = status.HTTP_202_ACCEPTED
        return response

    @extend_schema(request=None, responses={202: DeploymentSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, id=None):
        """Run again where steps are not verified yet; verified steps are skipped."""
        run = services.resume(deployment=self.get_object(), user=request.user)
        response = self._fresh(run.deployment)
        response.status_code = status.HTTP_202_ACCEPTED
        return response

    @extend_schema(
        methods=["GET"],
        request=None,
        responses={200: ClusterCheckSerializer(many=True)},
        operation_id="deployments_cluster_acceptance_list",
    )
    @extend_schema(
        methods=["POST"],
        request=None,
        responses={
            202: ClusterCheckSerializer(many=True),
            400: OpenApiResponse(description="Not now: a run in progress, nodes unverified, no phase 5 in the plan."),
        },
        operation_id="deployments_cluster_acceptance_rerun",
    )
    @action(detail=True, methods=["get", "post"], url_path="cluster-acceptance")
    def cluster_acceptance(self, request, id=None):
        """Phase 5's checks of the latest attempt (GET); POST (operators) runs the phase again over the nodes."""
        deployment = self.get_object()
        if request.method == "POST":
            checks = services.rerun_cluster_acceptance(deployment=deployment, user=request.user)
            return Response(ClusterCheckSerializer(checks, many=True).data, status=status.HTTP_202_ACCEPTED)
        return Response(ClusterCheckSerializer(cluster.latest_checks(deployment), many=True).data)

    @extend_schema(request=None, responses={200: VerdictSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def verdicts(self, request, id=None):
        """The latest verdict of every check on every node."""
        return Response(VerdictSerializer(services.latest_verdicts(self.get_object()), many=True).data)

    @extend_schema(request=None, responses={200: ApprovalSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def approvals(self, request, id=None):
        return Response(ApprovalSerializer(services.approvals(self.get_object()), many=True).data)

    @extend_schema(request=None, responses={200: OpenApiResponse(description="The acceptance report.")})
    @action(detail=True, methods=["get"])
    def report(self, request, id=None):
        """The acceptance report as data; `?download=html` gives the signed HTML file to hand to the customer."""
        deployment = self.get_object()
        if request.query_params.get("download") == "html":
            return report.html_download(deployment, signed_by=request.user.get_username())
        return Response(report.as_json(deployment))


class SuggestionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Suggestions from failed checks: operators approve the fix (the next resume runs it) or dismiss them."""

    queryset = Suggestion.objects.select_related("deployment", "run", "decided_by").order_by("-created", "-id")
    serializer_class = SuggestionSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    filterset_class = SuggestionFilterSet
    ordering_fields = ["created", "state"]
    search_fields = ["hostname", "title"]
    write_role = Role.OPERATOR

    @extend_schema(request=None, responses={200: SuggestionSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, id=None):
        suggestion = services.approve_suggestion(suggestion=self.get_object(), user=request.user)
        return Response(self.get_serializer(suggestion).data)

    @extend_schema(request=None, responses={200: SuggestionSerializer})
    @action(detail=True, methods=["post"])
    def dismiss(self, request, id=None):
        suggestion = services.dismiss_suggestion(suggestion=self.get_object(), user=request.user)
        return Response(self.get_serializer(suggestion).data)


class AcceptanceCriterionViewSet(viewsets.ModelViewSet):
    """Acceptance criteria per GPU SKU (no SKU: the defaults). Admins edit them; new deployments copy them."""

    queryset = AcceptanceCriterion.objects.select_related("sku").order_by("check_name", "sku__name", "id")
    serializer_class = AcceptanceCriterionSerializer
    filterset_class = AcceptanceCriterionFilterSet


def _stored_plan_conflict(error: StoredPlanInvalid) -> Response:
    """409: the plan as saved cannot be shown until its options are edited (PATCH them); each one is named."""
    errors = {path: [message] for path, message in error.errors.items()}
    return Response({"detail": str(error), "errors": errors}, status=status.HTTP_409_CONFLICT)
