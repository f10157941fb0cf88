"""Rules computed from the cluster graph. Each returns a RuleResult with the elements that break it.

The bandwidth model: a plane is the undirected graph of its switches, weighted by the capacity of the cables that are
up. Hosts do not forward traffic, so a host is not a vertex of that graph: it attaches to its switches. The bandwidth
between two compute nodes on a plane is the max-flow (= min-cut) between their attachments. Planes share no
switches, so the bandwidth between two nodes over the whole fabric is the sum over the planes (a cable joining
switches of two planes, which a dual-plane design does not have, is left out).

All pairs cost little: a Gomory-Hu tree of the plane's switch graph (n - 1 max-flows, n switches) gives the min-cut
between any two switches as the lightest edge on the tree path between them. A node attached to a single switch of
the plane (the usual case: one leaf per plane) then gets min(its capacity, the other's capacity, the switches' cut).
Nodes cabled to several switches of one plane (rail-optimised designs) get direct max-flows instead. Nodes with the
same attachments are interchangeable, so the work is per group of identical nodes (one per rack in the demo), not
per pair of nodes. A plane's tree is kept for as long as its switches and the capacity between them stay as they
are: editing, draining or re-cabling a node does not redo it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

from apps.core.text import counted
from apps.core.units import link_rate
from apps.inventory.choices import NicPurpose, SwitchTier
from apps.topology.choices import Verdict
from apps.topology.graph import SWITCH_PREFIX, ClusterGraph, key_name, node_key, switch_key

MAX_LISTED = 50  # offending elements listed in full; the figures still count all of them
MAX_EXAMPLES = 10


@dataclass
class RuleResult:
    """The outcome of one rule: a verdict, a one-paragraph explanation, what breaks it and the figures behind it."""

    name: str
    title: str
    passed: bool
    detail: str
    offending: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    # Edges to highlight on the map, as pairs of vertex keys ("node:gpu001", "switch:leaf-r01-a").
    links: list[tuple[str, str]] = field(default_factory=list)
    verdict: str = ""

    def __post_init__(self) -> None:
        if not self.verdict:
            self.verdict = Verdict.PASS if self.passed else Verdict.FAIL
        self.passed = self.verdict == Verdict.PASS

    @property
    def offending_count(self) -> int:
        return self.figures.get("offending_count", len(self.offending))


def _could_not_run(name: str, title: str, detail: str) -> RuleResult:
    return RuleResult(name=name, title=title, passed=False, detail=detail, verdict=Verdict.COULD_NOT_RUN)


_gbps = link_rate  # the one way pages write a link's rate (apps.core.units)


def _count(number: int, noun: str, plural: str = "") -> str:
    return f"{number} {noun if number == 1 else (plural or noun + 's')}"


def _names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# --- bandwidth between any two compute nodes -------------------------------------------------------------------


@dataclass
class PlaneCuts:
    """All-pairs min-cut between the switches of one plane, from its Gomory-Hu tree."""

    plane: str
    switch_graph: nx.Graph
    tree: nx.Graph | None
    max_flows: int = 0
    _from: dict[str, dict[str, float]] = field(default_factory=dict)

    def between(self, a: str, b: str) -> float:
        """Min-cut between two switches of the plane (infinite from a switch to itself)."""
        if a == b:
            return float("inf")
        if a not in self._from:
            self._from[a] = _path_minimum(self.tree, a)
        return self._from[a].get(b, 0.0)


def _path_minimum(tree: nx.Graph, source: str) -> dict[str, float]:
    """The lightest edge on the tree path from source to every vertex it reaches."""
    best = {source: float("inf")}
    stack = [source]
    while stack:
        here = stack.pop()
        for there, data in tree[here].items():
            if there not in best:
                best[there] = min(best[here], data["weight"])
                stack.append(there)
    return best


def plane_switch_graph(cluster: ClusterGraph, plane: str) -> nx.Graph:
    """The plane's switches joined by the capacity (Gb/s, cables up) between them."""
    graph = nx.Graph()
    graph.add_nodes_from(switch.key for switch in cluster.switches.values() if switch.plane == plane)
    for u, v, data in cluster.graph.edges(data=True):
        if data["kind"] == "fabric" and u in graph and v in graph:
            graph.add_edge(u, v, capacity=data["capacity_gbps"])
    return graph


def plane_cuts(cluster: ClusterGraph, plane: str) -> PlaneCuts:
    """The plane's cuts; its Gomory-Hu tree is worked out again only when its switches or the capacity between them
    changed (a node drained or re-cabled to its leaf leaves the tree as it was)."""
    graph = plane_switch_graph(cluster, plane)
    if len(graph) == 0:
        return PlaneCuts(plane=plane, switch_graph=graph, tree=None)
    fabric = (
        plane,
        frozenset(graph),
        frozenset((frozenset((u, v)), capacity) for u, v, capacity in graph.edges(data="capacity")),
    )
    tree = _TREES.get(fabric)
    if tree is not None:
        return PlaneCuts(plane=plane, switch_graph=graph, tree=tree)
    tree = nx.gomory_hu_tree(graph, capacity="capacity")
    if len(_TREES) >= TREES_KEPT:
        _TREES.pop(next(iter(_TREES), None), None)  # the oldest (another thread may have taken it)
    _TREES[fabric] = tree
    return PlaneCuts(plane=plane, switch_graph=graph, tree=tree, max_flows=len(graph) - 1)


TREES_KEPT = 8  # a few fabrics per plane: what an edit and its undo go back and forth between
_TREES: dict = {}  # (plane, its switches, their capacities) -> the plane's Gomory-Hu tree, oldest first


def forget_plane_cuts() -> None:
    """Work every plane's tree out afresh next time (tests that count max-flows)."""
    _TREES.clear()


def attachments(cluster: ClusterGraph, plane: str) -> dict[str, dict[str, float]]:
    """For each node (by hostname), the capacity it has up into each switch of the plane."""
    attached: dict[str, dict[str, float]] = defaultdict(dict)
    for u, v, data in cluster.graph.edges(data=True):
        if data["kind"] != "access" or data["capacity_gbps"] <= 0:
            continue
        host, switch = (u, v) if v.startswith(SWITCH_PREFIX) else (v, u)
        if cluster.switches[key_name(switch)].plane == plane:
            attached[key_name(host)][switch] = data["capacity_gbps"]
    return attached


def _max_flow_between(cuts: PlaneCuts, a: dict[str, float], b: dict[str, float]) -> float:
    """Max-flow between two sets of attachments over the plane's switches (hosts do not forward)."""
    graph = cuts.switch_graph.copy()
    source, sink = ("host", "source"), ("host", "sink")
    for end, attached in ((source, a), (sink, b)):
        for switch, capacity in attached.items():
            graph.add_edge(end, switch, capacity=capacity)
    cuts.max_flows += 1
    return nx.maximum_flow_value(graph, source, sink, capacity="capacity")


def _plane_bandwidth(cuts: PlaneCuts, a: dict[str, float], b: dict[str, float], same_group: bool) -> float:
    if not a or not b:
        return 0.0
    if same_group:
        # Two nodes with the same attachments: every shared switch carries min(c, c) = c; the degree bounds it.
        return float(sum(a.values()))
    if len(a) == 1 and len(b) == 1:
        (switch_a, cap_a), (switch_b, cap_b) = next(iter(a.items())), next(iter(b.items()))
        return float(min(cap_a, cap_b, cuts.between(switch_a, switch_b)))
    return float(_max_flow_between(cuts, a, b))


@dataclass
class PairBandwidth:
    """Bandwidth between groups of interchangeable compute nodes, per plane and over the whole fabric."""

    planes: list[str]
    groups: list[list[str]]  # hostnames, each group sharing the same attachments on every plane
    attached: dict[str, list[dict[str, float]]]  # plane -> attachments per group
    matrix: dict[str, list[list[float]]]  # plane (and "all") -> group x group bandwidth in Gb/s
    max_flows: int
    elapsed_ms: float

    def __post_init__(self) -> None:
        self._index = {host: i for i, group in enumerate(self.groups) for host in group}

    def between(self, plane: str, a: str, b: str) -> float:
        """Bandwidth in Gb/s between two compute nodes on a plane ("all": over the whole fabric)."""
        return self.matrix[plane][self._index[a]][self._index[b]]


def pair_bandwidth(cluster: ClusterGraph) -> PairBandwidth:
    """Min-cut bandwidth between every two compute nodes in service, per data plane and summed over them."""
    started = time.perf_counter()
    planes = cluster.data_planes()
    hosts = [node.hostname for node in cluster.compute_nodes()]
    attached_by_plane = {plane: attachments(cluster, plane) for plane in planes}
    grouped: dict[tuple, list[str]] = {}
    for host in hosts:
        signature = tuple(frozenset(attached_by_plane[plane].get(host, {}).items()) for plane in planes)
        grouped.setdefault(signature, []).append(host)
    groups = list(grouped.values())
    attached = {plane: [attached_by_plane[plane].get(group[0], {}) for group in groups] for plane in planes}
    matrix: dict[str, list[list[float]]] = {}
    max_flows = 0
    size = len(groups)
    for plane in planes:
        cuts = plane_cuts(cluster, plane)
        rows = [[0.0] * size for _ in range(size)]
        ends = attached[plane]
        for i in range(size):
            for j in range(i, size):
                rows[i][j] = rows[j][i] = _plane_bandwidth(cuts, ends[i], ends[j], i == j)
        matrix[plane] = rows
        max_flows += cuts.max_flows
    matrix["all"] = [[sum(matrix[plane][i][j] for plane in planes) for j in range(size)] for i in range(size)]
    return PairBandwidth(
        planes=planes,
        groups=groups,
        attached=attached,
        matrix=matrix,
        max_flows=max_flows,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


@dataclass
class _PairStats:
    minimum: float
    minimum_pair: tuple[str, str] | None
    pairs_below: int
    examples: list[tuple[str, str, float]]
    cut_off: list[str]  # hosts short of the threshold towards most of the others


def _pair_stats(bandwidth: PairBandwidth, plane: str, threshold: float) -> _PairStats:
    groups, rows = bandwidth.groups, bandwidth.matrix[plane]
    total = sum(len(group) for group in groups)
    minimum, minimum_pair, pairs_below = float("inf"), None, 0
    below: list[tuple[float, int, int]] = []
    short = [0] * len(groups)
    for i, group in enumerate(groups):
        for j in range(i, len(groups)):
            pairs = len(group) * (len(group) - 1) // 2 if i == j else len(group) * len(groups[j])
            if not pairs:
                continue
            value = rows[i][j]
            if value < minimum:
                minimum = value
                minimum_pair = (group[0], group[1] if i == j else groups[j][0])
            if value < threshold:
                pairs_below += pairs
                below.append((value, i, j))
                short[i] += len(groups[j]) - (1 if i == j else 0)
                if i != j:
                    short[j] += len(group)
    examples = []
    for value, i, j in sorted(below)[:MAX_EXAMPLES]:
        examples.append((groups[i][0], groups[i][1] if i == j else groups[j][0], value))
    cut_off = sorted(host for i, group in enumerate(groups) if short[i] > (total - 1) / 2 for host in group)
    return _PairStats(minimum, minimum_pair, pairs_below, examples, cut_off)


def rule_pair_bandwidth(
    cluster: ClusterGraph,
    *,
    threshold_gbps: float = 200,
    per_plane: bool = True,
    bandwidth: PairBandwidth | None = None,
) -> RuleResult:
    """Bandwidth (min-cut) between any two compute nodes >= threshold: on each plane alone (dual-plane redundancy,
    the default) or over the whole fabric."""
    name, title = "pair-bandwidth", f"Bandwidth between any two compute nodes ≥ {_gbps(threshold_gbps)}"
    if per_plane:
        title += " on each plane"
    bandwidth = bandwidth or pair_bandwidth(cluster)
    hosts = sum(len(group) for group in bandwidth.groups)
    if hosts < 2 or not bandwidth.planes:
        return _could_not_run(name, title, "Needs at least two compute nodes in service and a data plane.")

    overall = _pair_stats(bandwidth, "all", threshold_gbps)
    per = {plane: _pair_stats(bandwidth, plane, threshold_gbps) for plane in bandwidth.planes}
    judged = per if per_plane else {"all": overall}
    failing = {plane: stats for plane, stats in judged.items() if stats.minimum < threshold_gbps}

    offending_hosts = sorted({host for stats in failing.values() for host in stats.cut_off})
    offending_switches = _switches_behind(bandwidth, failing, set(offending_hosts))
    figures = {
        "threshold_gbps": threshold_gbps,
        "per_plane": per_plane,
        "compute_nodes": hosts,
        "groups": len(bandwidth.groups),
        "min_pair_gbps": overall.minimum,
        "min_pair": list(overall.minimum_pair or ()),
        "planes": {
            plane: {
                "min_pair_gbps": stats.minimum,
                "min_pair": list(stats.minimum_pair or ()),
                "pairs_below": stats.pairs_below,
            }
            for plane, stats in per.items()
        },
        "pairs_below": sum(stats.pairs_below for stats in judged.values()),
        "examples": [[a, b, value] for stats in failing.values() for a, b, value in stats.examples][:MAX_EXAMPLES],
        "max_flows": bandwidth.max_flows,
        "elapsed_ms": round(bandwidth.elapsed_ms, 1),
    }
    summary = f"Minimum between two nodes: {_gbps(overall.minimum)} over the fabric" + "".join(
        f", {_gbps(stats.minimum)} on plane {plane}" for plane, stats in per.items()
    )
    if not failing:
        detail = f"{summary}. All {hosts * (hosts - 1) // 2} pairs meet {_gbps(threshold_gbps)}."
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    parts = []
    for plane, stats in failing.items():
        where = "over the fabric" if plane == "all" else f"on plane {plane}"
        a, b, value = stats.examples[0]
        parts.append(
            f"{_count(stats.pairs_below, 'pair')} below {_gbps(threshold_gbps)} {where}"
            f" (e.g. {a} ↔ {b}: {_gbps(value)})"
        )
    detail = f"{summary}. " + "; ".join(parts) + "."
    if offending_hosts:
        detail += f" Cut off from the rest: {_names(offending_hosts)}"
        detail += f" behind {_names(offending_switches)}." if offending_switches else "."
    offending = offending_hosts + offending_switches
    figures["offending_count"] = len(offending)
    return RuleResult(
        name=name, title=title, passed=False, detail=detail, offending=offending[:MAX_LISTED], figures=figures
    )


def _switches_behind(bandwidth: PairBandwidth, failing: dict[str, _PairStats], offending: set[str]) -> list[str]:
    """Switches all of whose compute nodes on a failing plane are cut off: the ones to look at."""
    hosts_on: dict[str, set[str]] = defaultdict(set)
    for plane in failing:
        for plane_name in bandwidth.planes if plane == "all" else [plane]:
            for group, ends in zip(bandwidth.groups, bandwidth.attached[plane_name], strict=True):
                for switch in ends:
                    hosts_on[switch].update(group)
    return sorted(key_name(switch) for switch, hosts in hosts_on.items() if hosts and hosts <= offending)


# --- both planes --------------------------------------------------------------------------------------------------


def rule_dual_plane(cluster: ClusterGraph) -> RuleResult:
    """Every compute node in service has an up data link into each data plane."""
    name, title = "dual-plane", "Every compute node reaches both planes"
    planes = cluster.data_planes()
    nodes = cluster.compute_nodes()
    if not nodes or not planes:
        return _could_not_run(name, title, "Needs compute nodes in service and switches on the data planes.")
    missing: dict[str, list[str]] = {}
    mislabelled: list[str] = []
    up_links: dict[str, dict[str, int]] = {}
    links: list[tuple[str, str]] = []
    for node in nodes:
        counts = dict.fromkeys(planes, 0)
        for nic in cluster.nics.get(node.hostname, []):
            if not nic.is_data or nic.switch is None:
                continue
            if nic.plane and nic.switch_plane and nic.plane != nic.switch_plane:
                mislabelled.append(f"{nic.label} (plane {nic.plane}, cabled to {nic.switch})")
            if nic.link_up and nic.cabled_plane in counts:
                counts[nic.cabled_plane] += 1
            elif not nic.link_up:
                links.append((node.key, switch_key(nic.switch)))
        up_links[node.hostname] = counts
        lacking = [plane for plane, count in counts.items() if count == 0]
        if lacking:
            missing[node.hostname] = lacking
    figures = {
        "planes": planes,
        "nodes_checked": len(nodes),
        "missing": {host: lacking for host, lacking in list(missing.items())[:MAX_LISTED]},
        "missing_by_plane": {plane: sum(plane in lacking for lacking in missing.values()) for plane in planes},
        "mislabelled_nics": mislabelled[:MAX_LISTED],
        "offending_count": len(missing),
    }
    if not missing:
        detail = f"All {len(nodes)} compute nodes have an up data link into plane " + " and ".join(planes) + "."
        if mislabelled:
            detail += f" Note: NICs cabled to another plane than their label says: {_names(mislabelled, 4)}."
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    by_plane = "; ".join(
        f"no up link into plane {plane}: {_names([host for host, lack in missing.items() if plane in lack])}"
        for plane in planes
        if any(plane in lack for lack in missing.values())
    )
    detail = f"{len(missing)} of {_count(len(nodes), 'compute node')} miss a plane — {by_plane}."
    return RuleResult(
        name=name,
        title=title,
        passed=False,
        detail=detail,
        offending=sorted(missing)[:MAX_LISTED],
        figures=figures,
        links=[(a, b) for a, b in links if key_name(a) in missing],
    )


# --- leaf oversubscription ----------------------------------------------------------------------------------------


def rule_leaf_oversubscription(cluster: ClusterGraph, *, max_ratio: float = 1.0) -> RuleResult:
    """Per leaf: capacity down to the nodes / capacity up to the spines <= max_ratio (1.0 is non-blocking)."""
    name, title = "leaf-oversubscription", f"Leaf oversubscription ≤ {max_ratio:g}:1"
    leaves = [switch for switch in cluster.switches.values() if switch.tier == SwitchTier.LEAF]
    if not leaves:
        return _could_not_run(name, title, "No leaf switches in the inventory.")
    per_leaf: dict[str, dict] = {}
    offending: list[str] = []
    links: list[tuple[str, str]] = []
    for leaf in leaves:
        down = up = 0
        for other, data in cluster.graph[leaf.key].items():
            if other.startswith(SWITCH_PREFIX):
                tier = cluster.switches[key_name(other)].tier
                if tier not in (SwitchTier.LEAF, SwitchTier.MANAGEMENT):
                    up += data["installed_gbps"]
            else:
                down += data["installed_gbps"]
        ratio = (down / up) if up else (None if down else 0.0)
        per_leaf[leaf.name] = {
            "plane": leaf.plane,
            "downlink_gbps": down,
            "uplink_gbps": up,
            "ratio": None if ratio is None else round(ratio, 3),
        }
        if ratio is None or ratio > max_ratio:
            offending.append(leaf.name)
            links.extend((leaf.key, other) for other in cluster.graph[leaf.key] if other.startswith(SWITCH_PREFIX))
    ratios = [row["ratio"] for row in per_leaf.values() if row["ratio"] is not None]
    figures = {
        "max_ratio": max_ratio,
        "leaves": len(leaves),
        "worst_ratio": None if any(row["ratio"] is None for row in per_leaf.values()) else max(ratios, default=0.0),
        "per_leaf": per_leaf,
        "offending_count": len(offending),
    }
    if not offending:
        detail = f"All {len(leaves)} leaves are within {max_ratio:g}:1 (worst {figures['worst_ratio']:g}:1)."
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    described = []
    for leaf in offending[:8]:
        row = per_leaf[leaf]
        if row["ratio"] is None:
            described.append(f"{leaf} has {_gbps(row['downlink_gbps'])} down and no uplinks")
        else:
            described.append(
                f"{leaf} {row['ratio']:g}:1 ({_gbps(row['downlink_gbps'])} down, {_gbps(row['uplink_gbps'])} up)"
            )
    counted = _count(len(leaves), "leaf", "leaves")
    detail = f"{len(offending)} of {counted} oversubscribed: " + "; ".join(described) + "."
    return RuleResult(
        name=name,
        title=title,
        passed=False,
        detail=detail,
        offending=offending[:MAX_LISTED],
        figures=figures,
        links=links,
    )


# --- GPU-NIC affinity ---------------------------------------------------------------------------------------------


def rule_gpu_nic_affinity(cluster: ClusterGraph) -> RuleResult:
    """Each GPU has a data NIC under its PCIe switch (GPUDirect RDMA stays off the CPU); a NIC on the same NUMA node
    only is a warning, no NIC on the GPU's NUMA node a failure."""
    name, title = "gpu-nic-affinity", "Each GPU has a NIC under its PCIe switch (or at least on its NUMA node)"
    nodes = [node for node in cluster.compute_nodes() if cluster.gpus.get(node.hostname)]
    if not nodes:
        return _could_not_run(name, title, "No GPUs on compute nodes in service.")
    numa_only: list[str] = []
    remote: list[str] = []
    checked = 0
    for node in nodes:
        data_nics = [nic for nic in cluster.nics.get(node.hostname, []) if nic.purpose == NicPurpose.DATA]
        for gpu in cluster.gpus[node.hostname]:
            checked += 1
            if any(_pcie_peers(gpu, nic) for nic in data_nics):
                continue
            same_numa = gpu.numa_node is not None and any(nic.numa_node == gpu.numa_node for nic in data_nics)
            (numa_only if same_numa else remote).append(gpu.label)
    figures = {
        "gpus_checked": checked,
        "pcie_switch_peers": checked - len(numa_only) - len(remote),
        "numa_only": numa_only[:MAX_LISTED],
        "no_local_nic": remote[:MAX_LISTED],
        "offending_count": len(numa_only) + len(remote),
    }
    if not numa_only and not remote:
        detail = f"All {checked} GPUs share a PCIe switch with a data NIC."
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    parts = []
    if remote:
        parts.append(f"{_count(len(remote), 'GPU')} without a data NIC on its NUMA node ({_names(remote)})")
    if numa_only:
        parts.append(
            f"{_count(len(numa_only), 'GPU')} reaching a NIC only through the CPU of its NUMA node"
            f" ({_names(numa_only)})"
        )
    verdict = Verdict.FAIL if remote else Verdict.WARN
    return RuleResult(
        name=name,
        title=title,
        passed=False,
        detail="; ".join(parts) + ".",
        offending=(remote + numa_only)[:MAX_LISTED],
        figures=figures,
        verdict=verdict,
    )


def _pcie_peers(gpu, nic) -> bool:
    return gpu.index in nic.peer_gpu_indexes or bool(gpu.pcie_switch and gpu.pcie_switch == nic.pcie_switch)


# --- storage tiers ------------------------------------------------------------------------------------------------


def rule_storage_bandwidth(cluster: ClusterGraph) -> RuleResult:
    """Each storage tier delivers at least the bandwidth it is required to."""
    name, title = "storage-bandwidth", "Each storage tier meets its required bandwidth"
    if not cluster.storage_tiers:
        return _could_not_run(name, title, "No storage tiers in the inventory.")
    per_tier = {
        tier.name: {
            "kind": tier.kind,
            "site": tier.site,
            "bandwidth_gbytes_s": tier.bandwidth_gb_per_s,
            "required_gbytes_s": tier.required_bandwidth_gb_per_s,
        }
        for tier in cluster.storage_tiers
    }
    short = [tier for tier in cluster.storage_tiers if tier.bandwidth_gb_per_s < tier.required_bandwidth_gb_per_s]
    figures = {"tiers": len(cluster.storage_tiers), "per_tier": per_tier, "offending_count": len(short)}
    if not short:
        detail = (
            "All tiers deliver what they must: "
            + ", ".join(
                f"{tier.name} {tier.bandwidth_gb_per_s:g} ≥ {tier.required_bandwidth_gb_per_s:g} GB/s"
                for tier in cluster.storage_tiers
            )
            + "."
        )
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    detail = (
        "; ".join(
            f"{tier.name} delivers {tier.bandwidth_gb_per_s:g} GB/s, needs {tier.required_bandwidth_gb_per_s:g} GB/s"
            for tier in short
        )
        + "."
    )
    return RuleResult(
        name=name, title=title, passed=False, detail=detail, offending=[tier.name for tier in short], figures=figures
    )


# --- MTU ----------------------------------------------------------------------------------------------------------


def rule_data_mtu(cluster: ClusterGraph, *, expected_mtu: int = 9000) -> RuleResult:
    """Data NICs of nodes in service run the expected MTU, the same across each plane and within each node."""
    name, title = "data-mtu", f"Data NIC MTU is {expected_mtu} and consistent per plane"
    in_service = {node.hostname for node in cluster.nodes.values() if node.in_service}
    data_nics = [
        nic for host in sorted(in_service) for nic in cluster.nics.get(host, []) if nic.purpose == NicPurpose.DATA
    ]
    if not data_nics:
        return _could_not_run(name, title, "No data NICs on nodes in service.")
    per_plane: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    per_node: dict[str, set[int]] = defaultdict(set)
    wrong = []
    links = []
    for nic in data_nics:
        per_plane[nic.cabled_plane or "unassigned"][nic.mtu] += 1
        per_node[nic.hostname].add(nic.mtu)
        if nic.mtu != expected_mtu:
            wrong.append(nic)
            if nic.switch:
                links.append((node_key(nic.hostname), switch_key(nic.switch)))
    mixed_nodes = sorted(host for host, mtus in per_node.items() if len(mtus) > 1)
    inconsistent_planes = sorted(plane for plane, mtus in per_plane.items() if len(mtus) > 1)
    figures = {
        "expected_mtu": expected_mtu,
        "nics_checked": len(data_nics),
        "per_plane": {
            plane: {str(mtu): count for mtu, count in sorted(mtus.items())} for plane, mtus in per_plane.items()
        },
        "inconsistent_planes": inconsistent_planes,
        "nodes_with_mixed_mtu": mixed_nodes[:MAX_LISTED],
        "offending_count": len(wrong),
    }
    if not wrong:
        detail = f"All {len(data_nics)} data NICs run MTU {expected_mtu}."
        return RuleResult(name=name, title=title, passed=True, detail=detail, figures=figures)
    nodes = sorted({nic.hostname for nic in wrong})
    parts = [
        f"{_count(len(wrong), 'data NIC')} on {_count(len(nodes), 'node')} not at MTU {expected_mtu}: "
        + _names([f"{nic.label} ({nic.mtu})" for nic in wrong])
    ]
    if inconsistent_planes:
        parts.append("MTU differs across plane " + ", ".join(inconsistent_planes))
    if mixed_nodes:
        parts.append(f"nodes whose data NICs differ: {_names(mixed_nodes)}")
    return RuleResult(
        name=name,
        title=title,
        passed=False,
        detail="; ".join(parts) + ".",
        offending=[nic.label for nic in wrong][:MAX_LISTED],
        figures=figures,
        links=links,
    )


def all_pairs_reference(cluster: ClusterGraph, plane: str) -> dict[tuple[str, str], float]:
    """Reference values for tests and the bench: a Gomory-Hu tree of the whole plane graph, nodes included as vertices
    (exact whenever each node has one switch on the plane, as then nodes cannot carry transit traffic)."""
    graph = plane_switch_graph(cluster, plane)
    for host, ends in attachments(cluster, plane).items():
        for switch, capacity in ends.items():
            graph.add_edge(node_key(host), switch, capacity=capacity)
    hosts = [node.key for node in cluster.compute_nodes()]
    graph.add_nodes_from(hosts)
    tree = nx.gomory_hu_tree(graph, capacity="capacity")
    values = {}
    for a in hosts:
        reach = _path_minimum(tree, a)
        for b in hosts:
            if a < b:
                values[(key_name(a), key_name(b))] = reach.get(b, 0.0)
    return values


# --- NVLink domains (rack-scale systems) --------------------------------------------------------------------------


def rule_nvlink_domains(cluster: ClusterGraph) -> RuleResult:
    """Each NVLink domain is complete (every compute tray with its GPUs, every switch tray, every GPU's links to every
    switch tray, counting the links measured down) and each partition whole (trays of its domain only, in no other
    partition, with all their GPUs)."""
    name, title = "nvlink-domains", "NVLink domains are complete and their partitions whole"
    domains = cluster.nvlink_domains
    if not domains:
        return _could_not_run(name, title, "No NVLink domains in the inventory.")
    missing: list[str] = []  # the parts (trays, GPUs, links) named
    partitions: list[str] = []
    offending: list[str] = []
    links_missing = 0
    for domain in domains:
        absent_switches = [slot for slot in range(1, domain.switch_trays + 1) if slot not in domain.switches]
        absent_trays = [slot for slot in range(1, domain.compute_trays + 1) if slot not in domain.trays]
        for slot in absent_trays:
            missing.append(f"{domain.name} compute tray slot {slot} (its {domain.gpus_per_tray} GPUs)")
            offending.append(f"{domain.name}:tray{slot}")
        gpus = 0
        for _slot, host in sorted(domain.trays.items()):
            present = domain.tray_gpus.get(host, [])
            gpus += len(present)
            lacking = [index for index in range(domain.gpus_per_tray) if index not in present]
            if lacking:
                missing.append(f"{host} GPU " + ", ".join(map(str, lacking)) + " (not inventoried)")
                offending.append(host)
        for slot in absent_switches:
            per = domain.links_per_switch_tray
            links_missing += gpus * per
            missing.append(f"{domain.name} switch tray slot {slot} (every GPU's {per} links to it)")
            offending.append(f"{domain.name}:switch-tray{slot}")
        for fault in domain.faults:
            if fault.domain is not None:  # the switch tray itself: every GPU of the domain lost its links to it
                per = domain.links_per_switch_tray
                links_missing += gpus * per
                missing.append(
                    f"{domain.name} switch tray {fault.switch_slot} ({fault.hostname}): every GPU's {per} links to "
                    f"it down, measured ({fault.kind}: {fault.summary})"
                )
                offending.append(f"{domain.name}:switch-tray{fault.switch_slot}")
                continue
            gpu = f"GPU {fault.gpu_index}" if fault.gpu_index is not None else "every GPU"
            towards = f" to switch tray {fault.switch_slot}" if fault.switch_slot is not None else ""
            count = f"{counted(fault.links_down, 'link')} down" if fault.links_down else "links degraded"
            links_missing += (fault.links_down or 0) * (1 if fault.gpu_index is not None else domain.gpus_per_tray)
            missing.append(f"{fault.hostname} {gpu}: {count}{towards}, measured ({fault.kind}: {fault.summary})")
            offending.append(fault.hostname)
        found = _partition_problems(domain)
        partitions += found
        offending += [problem.split(" ", 1)[0] for problem in found]  # the partition's name
    figures = {
        "domains": len(domains),
        "gpus_checked": sum(len(gpus) for domain in domains for gpus in domain.tray_gpus.values()),
        "links_missing": links_missing,
        "missing": missing[:MAX_LISTED],
        "partitions": partitions[:MAX_LISTED],
        "offending_count": len(missing) + len(partitions),
    }
    if not missing and not partitions:
        detail = "; ".join(
            f"{domain.name} ({domain.system}): {len(domain.trays)} compute trays, {len(domain.switches)} switch trays,"
            f" every GPU with its {domain.links_per_gpu} links, {_count(len(domain.partitions), 'partition')} whole"
            for domain in domains
        )
        return RuleResult(name=name, title=title, passed=True, detail=detail + ".", figures=figures)
    parts = []
    if missing:
        parts.append(f"Missing: {_names(missing, 6)}")
    if partitions:
        parts.append(f"Partitions not whole: {_names(partitions, 4)}")
    return RuleResult(
        name=name,
        title=title,
        passed=False,
        detail="; ".join(parts) + ".",
        offending=list(dict.fromkeys(offending))[:MAX_LISTED],
        figures=figures,
    )


def _partition_problems(domain) -> list[str]:
    """A partition reaches trays outside its domain, shares a tray with another partition, or spans a tray partly
    (some of the tray's GPUs are not there to be in it)."""
    problems = []
    owner: dict[str, str] = {}
    for partition, members in sorted(domain.partitions.items()):
        strays = [host for host, tray_domain in members if tray_domain != domain.name]
        if strays:
            problems.append(f"{partition} reaches {_names(strays, 4)}, outside domain {domain.name}")
        shared = [host for host, _ in members if host in owner]
        if shared:
            others = sorted({owner[host] for host in shared})
            problems.append(f"{partition} shares {_names(shared, 4)} with {', '.join(others)}")
        for host, _ in members:
            owner.setdefault(host, partition)
        partly = [
            host
            for host, tray_domain in members
            if tray_domain == domain.name and len(domain.tray_gpus.get(host, [])) < domain.gpus_per_tray
        ]
        if partly:
            problems.append(f"{partition} spans {_names(partly, 4)} only partly (GPUs missing)")
    return problems
