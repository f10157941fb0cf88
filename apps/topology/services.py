"""Topology services: the graph summary and rule results, for the page, the API and the dashboard.

The evaluation with the default thresholds (every rule, and the map) is recorded when the inventory changes
(`record_topology`: on commit of a change to a node or the fabric, apps/topology/signals.py, and every minute for what
a bulk update changed) and the page and the dashboard read the newest record (`newest_evaluation`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from apps.inventory.models import Node
from apps.topology import rules
from apps.topology.charts import topology_figure
from apps.topology.graph import (
    DATA_PLANES,
    ClusterGraph,
    build_cluster_graph,
    fabric_figures,
    table_figures,
)
from apps.topology.models import TopologyEvaluation
from apps.topology.nvlink import nvlink_figures

DEFAULT_BANDWIDTH_THRESHOLD_GBPS = 200
DEFAULT_MAX_OVERSUBSCRIPTION = 1.0
DEFAULT_MTU = 9000
EVALUATIONS_KEPT = 10  # the newest is the cluster's; a few before it say what changed lately
RECHECK_S = 600  # a bulk update (no signal, no new fingerprint) shows within this (the periodic run checks again)


@dataclass(frozen=True)
class GraphSummary:
    nodes: int
    compute_nodes: int
    management_nodes: int
    switches: int
    links: int  # aggregated edges (one per pair of connected elements)
    cables: int
    capacity_gbps_by_plane: dict[str, int]  # installed capacity of every cable on each plane
    up_capacity_gbps_by_plane: dict[str, int]  # the same, counting only cables that are up
    planes: list[str] = field(default_factory=list)


@dataclass
class TopologyReport:
    summary: GraphSummary
    rules: list[rules.RuleResult]
    cluster: ClusterGraph
    elapsed_ms: float

    @property
    def passed(self) -> bool:
        return all(rule.passed for rule in self.rules)

    @property
    def failing(self) -> list[rules.RuleResult]:
        """Rules that did not pass (fail, warn or could-not-run)."""
        return [rule for rule in self.rules if not rule.passed]


@dataclass(frozen=True)
class RuleSummary:
    """What the dashboard shows: every rule's outcome (iterate it), counts, and the rules that did not pass."""

    rules: list[rules.RuleResult]
    fingerprint: str = ""

    def __iter__(self) -> Iterator[rules.RuleResult]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def total(self) -> int:
        return len(self.rules)

    @property
    def passed(self) -> int:
        return sum(rule.passed for rule in self.rules)

    @property
    def failing(self) -> list[rules.RuleResult]:
        """Rules that did not pass: fail, warn or could-not-run."""
        return [rule for rule in self.rules if not rule.passed]

    @property
    def all_passed(self) -> bool:
        return not self.failing


def summarise_graph(cluster: ClusterGraph) -> GraphSummary:
    installed: dict[str, int] = {}
    up: dict[str, int] = {}
    for _, _, data in cluster.edges():
        for cable in data["cables"]:
            plane = cable.plane or "unassigned"
            installed[plane] = installed.get(plane, 0) + cable.speed_gbps
            up[plane] = up.get(plane, 0) + (cable.speed_gbps if cable.up else 0)
    order = {plane: i for i, plane in enumerate([*DATA_PLANES, "mgmt"])}
    planes = sorted(installed, key=lambda plane: (order.get(plane, len(order)), plane))
    return GraphSummary(
        nodes=len(cluster.nodes),
        compute_nodes=len(cluster.compute_nodes(in_service_only=False)),
        management_nodes=sum(node.role == "management" for node in cluster.nodes.values()),
        switches=len(cluster.switches),
        links=cluster.graph.number_of_edges(),
        cables=cluster.cable_count,
        capacity_gbps_by_plane={plane: installed[plane] for plane in planes},
        up_capacity_gbps_by_plane={plane: up[plane] for plane in planes},
        planes=planes,
    )


def run_rules(
    cluster: ClusterGraph,
    *,
    bandwidth_threshold_gbps: float = DEFAULT_BANDWIDTH_THRESHOLD_GBPS,
    per_plane: bool = True,
    max_oversubscription: float = DEFAULT_MAX_OVERSUBSCRIPTION,
    expected_mtu: int = DEFAULT_MTU,
) -> list[rules.RuleResult]:
    results = [
        rules.rule_pair_bandwidth(cluster, threshold_gbps=bandwidth_threshold_gbps, per_plane=per_plane),
        rules.rule_dual_plane(cluster),
        rules.rule_leaf_oversubscription(cluster, max_ratio=max_oversubscription),
        rules.rule_gpu_nic_affinity(cluster),
        rules.rule_storage_bandwidth(cluster),
        rules.rule_data_mtu(cluster, expected_mtu=expected_mtu),
    ]
    if cluster.nvlink_domains:  # a fleet without rack-scale systems has nothing for it to check, and no verdict
        results.append(rules.rule_nvlink_domains(cluster))
    return results


def evaluate_topology(
    *,
    bandwidth_threshold_gbps: float = DEFAULT_BANDWIDTH_THRESHOLD_GBPS,
    per_plane: bool = True,
    max_oversubscription: float = DEFAULT_MAX_OVERSUBSCRIPTION,
    expected_mtu: int = DEFAULT_MTU,
) -> TopologyReport:
    """Build the graph from the inventory and run every rule on it."""
    started = time.perf_counter()
    cluster = build_cluster_graph()
    results = run_rules(
        cluster,
        bandwidth_threshold_gbps=bandwidth_threshold_gbps,
        per_plane=per_plane,
        max_oversubscription=max_oversubscription,
        expected_mtu=expected_mtu,
    )
    return TopologyReport(
        summary=summarise_graph(cluster),
        rules=results,
        cluster=cluster,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


def topology_fingerprint() -> str:
    """The state of what the topology rules and map are worked out from (the nodes' and the fabric's tables, the NVLink
    domains' tables and the link faults measured in them): changes whenever one of their rows is created, deleted or
    saved, and (the row counts and highest keys) when rows are bulk created or deleted. Not the simulator's telemetry
    key (its own, over the tables the simulated nodes are built from)."""
    figures = [table_figures(Node), *fabric_figures(), *nvlink_figures()]
    return hashlib.sha256(repr(figures).encode()).hexdigest()[:32]


def record_topology() -> TopologyEvaluation | None:
    """Evaluate the inventory as it is now (every rule with the default thresholds, and the map) and append the
    result where the inventory moved since the newest record. A bulk update moves no fingerprint (it leaves `updated`
    alone), so a record older than RECHECK_S is checked again: the same outcome marks it as still holding (its
    `updated`), another is appended. Returns the new record, or None where the newest still holds."""
    fingerprint = topology_fingerprint()  # read first: a change meanwhile leaves the record newer than its key
    newest = newest_evaluation()
    same_state = newest is not None and newest.fingerprint == fingerprint
    if same_state and (timezone.now() - newest.updated).total_seconds() < RECHECK_S:
        return None
    report = evaluate_topology()
    outcome = _as_stored(
        {
            "summary": dataclasses.asdict(report.summary),
            "rules": [dataclasses.asdict(rule) for rule in report.rules],
            "figure": topology_figure(report.cluster, report.rules),
        }
    )
    if same_state and _same_outcome(outcome, newest):
        newest.save(update_fields=["updated"])  # checked again: it still holds
        return None
    evaluation = TopologyEvaluation.objects.create(fingerprint=fingerprint, elapsed_ms=report.elapsed_ms, **outcome)
    kept = TopologyEvaluation.objects.values_list("pk", flat=True)[:EVALUATIONS_KEPT]
    TopologyEvaluation.objects.exclude(pk__in=list(kept)).delete()
    return evaluation


def _as_stored(outcome: dict) -> dict:
    """The outcome as the record's JSON holds it (tuples as lists), so that two can be compared."""
    return json.loads(json.dumps(outcome, cls=DjangoJSONEncoder))


WORK_FIGURES = {"elapsed_ms", "max_flows"}


def _same_outcome(outcome: dict, evaluation: TopologyEvaluation) -> bool:
    """Whether an evaluation says what the record says (how each rule did its work aside: its time, and the max-flows
    it ran, none where the plane's Gomory–Hu tree was already worked out)."""

    def verdicts(rows: list[dict]) -> list[dict]:
        return [{**row, "figures": {k: v for k, v in row["figures"].items() if k not in WORK_FIGURES}} for row in rows]

    recorded = _as_stored({"summary": evaluation.summary, "rules": evaluation.rules, "figure": evaluation.figure})
    return (outcome["summary"], outcome["figure"]) == (recorded["summary"], recorded["figure"]) and verdicts(
        outcome["rules"]
    ) == verdicts(recorded["rules"])


def newest_evaluation() -> TopologyEvaluation | None:
    """The cluster's recorded evaluation; None before the first (a fresh install, before the periodic loop's first
    pass), where readers evaluate the inventory themselves."""
    return TopologyEvaluation.objects.first()


def recorded_rules(evaluation: TopologyEvaluation) -> list[rules.RuleResult]:
    """The rules' results as they were recorded."""
    return [
        rules.RuleResult(**{**row, "links": [tuple(link) for link in row.get("links", [])]}) for row in evaluation.rules
    ]


def recorded_summary(evaluation: TopologyEvaluation) -> GraphSummary:
    return GraphSummary(**evaluation.summary)


def rule_summary() -> RuleSummary:
    """Every rule's outcome with the default thresholds, for the dashboard: the newest record's (evaluated here only
    before the first record)."""
    evaluation = newest_evaluation()
    if evaluation is None:
        return RuleSummary(rules=evaluate_topology().rules)
    return RuleSummary(rules=recorded_rules(evaluation), fingerprint=evaluation.fingerprint)
