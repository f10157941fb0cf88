"""A fleet past two tiers: pods of racks joined by a core. The graph, the rules, the map, the switch page's crossings
and the simulator's fabric model all walk leaf → spine → core → spine → leaf between pods."""

import json

import networkx as nx
import pytest

from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Cable, Node, Switch

pytestmark = pytest.mark.django_db

# One node per rack keeps it small: 4 uplinks per leaf, so two tiers hold 124 racks and 130 make three pods.
FLEET = ClusterShape(compute_nodes=130, nodes_per_rack=1, management_nodes=1)


def test_the_graph_rules_and_map_go_through_the_core_between_pods(db):
    from apps.topology.charts import topology_figure
    from apps.topology.graph import build_cluster_graph, switch_key
    from apps.topology.rules import plane_switch_graph, rule_leaf_oversubscription, rule_pair_bandwidth

    load_cluster(FLEET)
    cluster = build_cluster_graph()

    plane_a = plane_switch_graph(cluster, "A")
    path = nx.shortest_path(plane_a, switch_key("leaf-r01-a"), switch_key("leaf-r130-a"))  # pod 1 to pod 3
    assert [cluster.switches[key.split(":", 1)[1]].tier for key in path] == ["leaf", "spine", "core", "spine", "leaf"]
    assert rule_leaf_oversubscription(cluster).verdict == "pass"
    pairs = rule_pair_bandwidth(cluster)
    assert pairs.verdict == "pass", pairs.detail  # full bandwidth between any two nodes, across pods too

    figure = topology_figure(cluster, [], group_above=1000)
    assert "Core" in figure["layout"]["yaxis"]["ticktext"]
    # A fleet too big to draw switch by switch: one marker per pod, per pod and plane its leaves and its spines.
    grouped = topology_figure(cluster, [])
    assert grouped["layout"]["title"]["text"] == "130 compute nodes in 3 pods — one marker per pod"
    text = json.dumps(grouped, ensure_ascii=False)
    assert "64 leaves · pod 1" in text and "4 spines · pod 3" in text and "7 cores" in text
    markers = sum(len(trace["x"]) for trace in grouped["data"] if trace.get("mode", "").startswith("markers"))
    assert markers < 60  # 19 markers and the links' hover targets; rack by rack it was 130 racks and 282 switches


def test_a_core_port_carries_the_tests_that_crossed_pods_and_a_ring_across_pods_sees_the_core(db):
    from apps.benchmarks.crossings import switch_crossings
    from apps.benchmarks.models import BenchmarkTest
    from apps.jobs.models import Job
    from apps.simulator.model import ring_model
    from apps.simulator.services import node_state

    load_cluster(FLEET)
    for hosts in (["gpu001", "gpu130"], ["gpu001", "gpu002"]):  # across pods 1 and 3; inside pod 1
        BenchmarkTest.objects.create(
            job=Job.objects.create(kind="nccl-tests", transport="sim"),
            launcher=hosts[0],
            hosts=hosts,
            hosts_key=",".join(sorted(hosts)),
            collective="all_reduce",
            busbw_gb_per_s=380.0,
            verdict="pass",
        )
    core = Switch.objects.get(name="core-a1")
    rows = {row.far: row for row in switch_crossings(core) if row.tests}
    assert rows and all([test.hosts for test in row.tests] == [["gpu001", "gpu130"]] for row in rows.values())
    assert {far.split("-")[1] for far in rows} == {"p01", "p03"}  # the downlinks to the two pods' spines
    spine = Switch.objects.get(name="spine-p01-a1")
    uplinks = [row for row in switch_crossings(spine) if row.far.startswith("core-")]
    assert uplinks and all([test.hosts for test in row.tests] == [["gpu001", "gpu130"]] for row in uplinks)

    # Pod 3 holds two racks: its spines take 2 links down; with 1 link left up to the core, a ring inside pod 1 keeps
    # full speed and one across pods gets half.
    for spine in Switch.objects.filter(name__startswith="spine-p03-"):
        cables = Cable.objects.filter(a_switch=spine, b_switch__tier="core").order_by("a_port")
        Cable.objects.filter(pk__in=list(cables.values_list("pk", flat=True)[1:])).delete()
    states = {host: node_state(node=Node.objects.get(hostname=host)) for host in ("gpu001", "gpu002", "gpu130")}
    inside = ring_model("all_reduce", [states["gpu001"], states["gpu002"]], 8)
    across = ring_model("all_reduce", [states["gpu001"], states["gpu130"]], 8)
    assert states["gpu130"].core_uplink_ratio == 0.5
    assert across.peak_busbw_gb_per_s == pytest.approx(inside.peak_busbw_gb_per_s / 2)
