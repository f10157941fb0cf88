"""The topology over the API: the whole graph with rule results, or the rule results alone. Read-only, any role."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.topology.api.serializers import TopologyReportSerializer, TopologyRulesSerializer, graph_data
from apps.topology.services import evaluate_topology


class TopologyView(APIView):
    """The cluster graph built from the inventory (nodes, switches, links with ports and speeds) and the rules."""

    @extend_schema(
        operation_id="topology_retrieve",
        summary="Topology graph and rule results",
        responses=TopologyReportSerializer,
        tags=["topology"],
    )
    def get(self, request: Request) -> Response:
        report = evaluate_topology()
        data = {
            "passed": report.passed,
            "rules": report.rules,
            "summary": report.summary,
            "graph": graph_data(report.cluster),
            "elapsed_ms": round(report.elapsed_ms, 1),
        }
        return Response(TopologyReportSerializer(data).data)


class TopologyRulesView(APIView):
    """The topology rules' outcomes: verdict, explanation, offending elements and figures."""

    @extend_schema(
        operation_id="topology_rules_retrieve",
        summary="Topology rule results",
        responses=TopologyRulesSerializer,
        tags=["topology"],
    )
    def get(self, request: Request) -> Response:
        report = evaluate_topology()
        return Response(TopologyRulesSerializer({"passed": report.passed, "rules": report.rules}).data)
