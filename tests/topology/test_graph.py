"""The graph built from the inventory: what it holds, and that its cost does not grow with the cluster."""

import pytest

from apps.topology.graph import build_cluster_graph, node_key, switch_key
from tests.topology.helpers import nic

pytestmark = pytest.mark.django_db


def test_demo_graph_has_every_node_and_switch(demo_cluster):
    cluster = build_cluster_graph()
    assert len(cluster.nodes) == 35 and len(cluster.compute_nodes()) == 32
    # 4 racks x 2 planes of leaves, 2 spines per plane, the management switch.
    assert len(cluster.switches) == 13
    assert cluster.data_planes() == ["A", "B"]
    assert cluster.nodes["gpu001"].rack == "r01"  # what a node is lives beside the graph (the fabric)
    assert cluster.graph.nodes[switch_key("leaf-r01-a")]["tier"] == "leaf"


def test_cables_are_aggregated_per_pair_with_ports(demo_cluster):
    cluster = build_cluster_graph()
    access = cluster.graph.edges[node_key("gpu001"), switch_key("leaf-r01-a")]
    assert access["kind"] == "access" and access["plane"] == "A"
    assert access["capacity_gbps"] == 1600 and len(access["cables"]) == 4
    assert {cable.a for cable in access["cables"]} == {f"gpu001:ens{k}np0" for k in (1, 3, 5, 7)}
    assert all(cable.b.startswith("leaf-r01-a:swp") for cable in access["cables"])
    uplink = cluster.graph.edges[switch_key("leaf-r01-a"), switch_key("spine-a1")]
    # 32 downlinks per leaf spread over two spines: 16 x 400G to each.
    assert uplink["kind"] == "fabric" and uplink["capacity_gbps"] == 6400 and len(uplink["cables"]) == 16
    management = cluster.graph.edges[node_key("gpu001"), switch_key("mgmt-sw01")]
    assert management["plane"] == "mgmt" and management["capacity_gbps"] == 25


def test_a_link_down_keeps_the_cable_but_not_its_capacity(demo_cluster):
    port = nic("gpu001", "ens1np0")
    port.link_up = False
    port.save()
    edge = build_cluster_graph().graph.edges[node_key("gpu001"), switch_key("leaf-r01-a")]
    assert edge["installed_gbps"] == 1600 and edge["capacity_gbps"] == 1200
    assert [cable.up for cable in edge["cables"] if cable.a == "gpu001:ens1np0"] == [False]


def test_nic_detail_knows_where_each_nic_is_cabled(demo_cluster):
    cluster = build_cluster_graph()
    by_name = {item.name: item for item in cluster.nics["gpu009"]}
    assert by_name["ens2np0"].switch == "leaf-r02-b" and by_name["ens2np0"].cabled_plane == "B"
    assert by_name["ens1np0"].peer_gpu_indexes == {0, 1}
    assert by_name["eno1"].switch == "mgmt-sw01"
    assert [gpu.index for gpu in cluster.gpus["gpu009"]] == list(range(8))


def test_building_the_graph_takes_eight_queries(demo_cluster, django_assert_num_queries):
    # The same eight with 512 nodes: see test_charts.py::test_the_map_of_512_nodes_groups_them_by_rack.
    with django_assert_num_queries(8):  # the nodes, the fabric's six, the NVLink domains (none)
        build_cluster_graph()


def test_an_empty_inventory_gives_an_empty_graph(db):
    cluster = build_cluster_graph()
    assert cluster.graph.number_of_nodes() == 0 and cluster.data_planes() == []
