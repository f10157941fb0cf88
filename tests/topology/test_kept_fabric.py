"""The fabric (switches, NICs, GPUs, cables, storage tiers) is kept between requests and the nodes are read afresh:
a node's new status shows at once in every rule and on the map without rebuilding the fabric, and a fabric edit
rebuilds it."""

import pytest

from apps.core.reads import ReadScope
from apps.inventory.choices import NodeStatus, Plane
from apps.inventory.models import Cable, Nic, Node
from apps.topology import graph
from apps.topology.charts import COLOURS, topology_figure
from apps.topology.graph import build_cluster_graph, node_key, switch_key
from apps.topology.services import evaluate_topology, kept_for_s
from apps.topology.views import topology_page
from tests.topology.helpers import nic, rule, unplug_plane

pytestmark = pytest.mark.django_db


def set_status(hostname: str, status: str) -> None:
    node = Node.objects.get(hostname=hostname)
    node.status = status
    node.save()


def compute_marker(figure: dict, hostname: str) -> tuple[str, str]:
    """(colour, hover text) of a node's marker on the map."""
    trace = next(trace for trace in figure["data"] if trace["name"] == "Compute nodes")
    index = next(i for i, text in enumerate(trace["hovertext"]) if text.startswith(f"<b>{hostname}</b>"))
    return trace["marker"]["color"][index], trace["hovertext"][index]


def drawn(report) -> dict:
    return topology_figure(report.cluster, report.rules)


def test_a_failed_node_shows_in_every_rule_and_on_the_map_while_the_fabric_is_kept(demo_cluster):
    before = evaluate_topology()
    assert rule(before, "pair-bandwidth").figures["compute_nodes"] == 32

    set_status("gpu005", NodeStatus.FAILED)
    failed = evaluate_topology()

    assert failed.cluster.graph is before.cluster.graph  # the fabric was not read again
    assert failed.cluster.nics is before.cluster.nics
    node = failed.cluster.nodes["gpu005"]
    assert (node.status, node.in_service) == ("failed", False)
    assert rule(failed, "pair-bandwidth").figures["compute_nodes"] == 31
    assert rule(failed, "dual-plane").figures["nodes_checked"] == 31
    assert rule(failed, "gpu-nic-affinity").figures["gpus_checked"] == 31 * 8
    assert rule(failed, "data-mtu").figures["nics_checked"] == 262 - 8  # its eight data NICs
    colour, hover = compute_marker(drawn(failed), "gpu005")
    assert colour == COLOURS["red"] and "compute · failed · rack r01" in hover

    set_status("gpu005", NodeStatus.READY)
    back = evaluate_topology()
    assert back.cluster.graph is before.cluster.graph
    assert back.cluster.nodes["gpu005"].in_service and rule(back, "pair-bandwidth").figures["compute_nodes"] == 32
    assert compute_marker(drawn(back), "gpu005")[0] == COLOURS["green"]


def test_a_node_saved_costs_reading_the_nodes_and_the_fabric_aggregates_only(demo_cluster, django_assert_num_queries):
    build_cluster_graph()
    set_status("gpu005", NodeStatus.DEGRADED)
    with django_assert_num_queries(9):
        assert build_cluster_graph().nodes["gpu005"].status == "degraded"


def test_a_saved_nic_rebuilds_the_fabric_and_leaves_the_kept_one_as_it_was(demo_cluster):
    before = evaluate_topology()
    port = nic("gpu003", "ens2np0")
    port.mtu = 1500
    port.save()

    after = evaluate_topology()

    assert after.cluster.graph is not before.cluster.graph
    assert rule(after, "data-mtu").offending == ["gpu003:ens2np0"]
    # What other requests may still hold is not changed under them.
    assert {item.mtu for item in before.cluster.nics["gpu003"] if item.is_data} == {9000}
    assert rule(before, "data-mtu").passed


def test_a_saved_or_deleted_cable_rebuilds_the_fabric(demo_cluster):
    edge = (node_key("gpu001"), switch_key("leaf-r01-a"))
    assert build_cluster_graph().graph.edges[edge]["capacity_gbps"] == 1600
    cable = Cable.objects.get(a_nic=nic("gpu001", "ens1np0"))
    cable.speed_gbps = 100
    cable.save()
    assert build_cluster_graph().graph.edges[edge]["capacity_gbps"] == 1300

    unplug_plane("gpu030", Plane.A)
    assert rule(evaluate_topology(), "dual-plane").offending == ["gpu030"]


def test_a_renamed_node_rebuilds_the_fabric_its_nics_are_labelled_with(demo_cluster):
    build_cluster_graph()
    node = Node.objects.get(hostname="gpu001")
    node.hostname = "gpu901"
    node.save()

    cluster = build_cluster_graph()

    assert "gpu001" not in cluster.nics and cluster.nics["gpu901"][0].label.startswith("gpu901:")
    assert cluster.graph.has_edge(node_key("gpu901"), switch_key("leaf-r01-a"))


def test_a_bulk_update_shows_once_the_kept_fabric_is_older_than_its_bound(demo_cluster, monkeypatch):
    kept = build_cluster_graph()
    Nic.objects.filter(node__hostname="gpu003", name="ens2np0").update(mtu=1500)  # leaves `updated` alone

    assert build_cluster_graph().graph is kept.graph  # unseen by the fingerprint: kept until its bound
    monkeypatch.setattr(graph, "FABRIC_MAX_AGE_S", 0)
    assert {item.mtu for item in build_cluster_graph().nics["gpu003"] if item.name == "ens2np0"} == {1500}


def test_what_is_cached_from_a_graph_expires_with_its_fabric(demo_cluster, monkeypatch):
    cluster = build_cluster_graph()
    monkeypatch.setattr(cluster, "fabric_built", cluster.fabric_built - 50)
    assert 9 <= kept_for_s(cluster, 60) <= 10  # a bulk update shows within 60 s, not 50 + 60
    monkeypatch.setattr(cluster, "fabric_built", cluster.fabric_built - 100)
    assert kept_for_s(cluster, 60) == 1


def test_the_page_after_a_node_save_asks_the_fabric_figures_once_and_reads_only_the_nodes(
    demo_cluster, django_assert_num_queries
):
    topology_page()
    set_status("gpu005", NodeStatus.FAILED)
    with ReadScope("GET"), django_assert_num_queries(10):  # the page's key (the nodes' and fabric's figures), the nodes
        page = topology_page()
    assert "compute · failed · rack r01" in compute_marker(page["figure"], "gpu005")[1]
