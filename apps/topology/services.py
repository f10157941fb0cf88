"""Topology services: the graph summary and rule results, for the page, the API and the dashboard."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.core.cache import cache

from apps.inventory.models import Node
from apps.topology import rules
from apps.topology.graph import (
    DATA_PLANES,
    FABRIC_MAX_AGE_S,
    ClusterGraph,
    build_cluster_graph,
    fabric_figures,
    table_figures,
)

DEFAULT_BANDWIDTH_THRESHOLD_GBPS = 200
DEFAULT_MAX_OVERSUBSCRIPTION = 1.0
DEFAULT_MTU = 9000
SUMMARY_MAX_AGE_S = FABRIC_MAX_AGE_S  # bulk updates (which leave `updated` alone) show within this, everywhere


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
    return [
        rules.rule_pair_bandwidth(cluster, threshold_gbps=bandwidth_threshold_gbps, per_plane=per_plane),
        rules.rule_dual_plane(cluster),
        rules.rule_leaf_oversubscription(cluster, max_ratio=max_oversubscription),
        rules.rule_gpu_nic_affinity(cluster),
        rules.rule_storage_bandwidth(cluster),
        rules.rule_data_mtu(cluster, expected_mtu=expected_mtu),
    ]


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
    """The state of what the topology rules and map are worked out from (the nodes' and the fabric's tables): changes
    whenever one of their rows is created, deleted or saved. Not the simulator's telemetry key (its own, over the
    tables the simulated nodes are built from)."""
    figures = [table_figures(Node), *fabric_figures()]
    return hashlib.sha256(repr(figures).encode()).hexdigest()[:32]


def rule_summary(*, max_age_s: int = SUMMARY_MAX_AGE_S) -> RuleSummary:
    """Every rule's outcome with the default thresholds, for the dashboard.

    Cached by an inventory fingerprint, so edits saved through the UI, the API or imports show at once; changes made
    by bulk updates (which leave ``updated`` alone) show within ``max_age_s``. ``max_age_s=0`` always recomputes.
    """
    fingerprint = topology_fingerprint() if max_age_s else ""
    if max_age_s:
        cached = cache.get(_summary_key(fingerprint))
        if cached is not None:
            return cached
    report = evaluate_topology()
    summary = RuleSummary(rules=report.rules, fingerprint=fingerprint)
    if max_age_s:
        cache.set(_summary_key(fingerprint), summary, kept_for_s(report.cluster, max_age_s))
    return summary


def kept_for_s(cluster: ClusterGraph, max_age_s: int) -> int:
    """How long to cache what was worked out from the cluster: max_age_s less the age of the fabric it was built on,
    which is kept up to as long itself, so a bulk update shows within max_age_s and not twice that."""
    return max(1, int(max_age_s - cluster.fabric_age_s))


def remember_rule_summary(
    results: list[rules.RuleResult], *, fingerprint: str, max_age_s: int = SUMMARY_MAX_AGE_S
) -> None:
    """Keep rules just evaluated with the default thresholds (by the topology page) for the dashboard too."""
    cache.set(_summary_key(fingerprint), RuleSummary(rules=results, fingerprint=fingerprint), max_age_s)


def _summary_key(fingerprint: str) -> str:
    return f"topology:rule-summary:{fingerprint}"
