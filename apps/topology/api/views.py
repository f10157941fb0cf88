"""The topology over the API: the whole graph with rule results, or the rule results alone. Read-only, any role."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ViewSet

from apps.topology.api.serializers import TopologyReportSerializer, TopologyRulesSerializer, graph_data
from apps.topology.services import evaluate_topology


class _OneReport(AutoSchema):
    """`list` is the router's name for `/api/topology/`, which answers one report, not a list of them."""

    def _is_list_view(self, serializer=None) -> bool:
        return False


class TopologyViewSet(ViewSet):
    """The topology on the one API router: the graph with the rules (`/api/topology/`), or the rules alone
    (`/api/topology/rules/`)."""

    schema = _OneReport()

    @extend_schema(
        operation_id="topology_retrieve",
        summary="Topology graph and rule results",
        description=(
            "The cluster graph built from the inventory (nodes, switches, links with ports and speeds) and the rules."
        ),
        responses=TopologyReportSerializer,
        tags=["topology"],
    )
    def list(self, request: Request) -> Response:
        report = evaluate_topology()
        data = {
            "passed": report.passed,
            "rules": report.rules,
            "summary": report.summary,
            "graph": graph_data(report.cluster),
            "elapsed_ms": round(report.elapsed_ms, 1),
        }
        return Response(TopologyReportSerializer(data).data)

    @extend_schema(
        operation_id="topology_rules_retrieve",
        summary="Topology rule results",
        description="The topology rules' outcomes: verdict, explanation, offending elements and figures.",
        responses=TopologyRulesSerializer,
        tags=["topology"],
    )
    @action(detail=False, methods=["get"], url_path="rules")
    def rules(self, request: Request) -> Response:
        report = evaluate_topology()
        return Response(TopologyRulesSerializer({"passed": report.passed, "rules": report.rules}).data)
