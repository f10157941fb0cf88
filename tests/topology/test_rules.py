"""Topology rules: the demo cluster passes them all; each way of breaking it fails the right rule, naming the right
elements with the right figures."""

from decimal import Decimal

import pytest

from apps.inventory.choices import NicPurpose, Plane, SwitchTier
from apps.inventory.models import Cable, Gpu, Nic, StorageTier
from apps.topology import rules
from apps.topology.choices import Verdict
from apps.topology.graph import build_cluster_graph
from apps.topology.services import evaluate_topology
from tests import factories
from tests.topology.helpers import R01_NODES, delete_leaf_uplinks, nic, rule, unplug_plane, verdicts

pytestmark = pytest.mark.django_db

ALL_RULES = [
    "pair-bandwidth",
    "dual-plane",
    "leaf-oversubscription",
    "gpu-nic-affinity",
    "storage-bandwidth",
    "data-mtu",
]


def test_the_demo_cluster_passes_every_rule(demo_cluster):
    report = evaluate_topology()
    assert verdicts(report) == dict.fromkeys(ALL_RULES, Verdict.PASS)
    assert report.passed and all(not result.offending for result in report.rules)


def test_demo_bandwidth_figures(demo_cluster):
    rules.forget_plane_cuts()
    bandwidth = rule(evaluate_topology(), "pair-bandwidth")
    # Each node has 4 x 400G per plane into a non-blocking fabric: 1.6 Tb/s per plane, 3.2 Tb/s over both.
    assert bandwidth.figures["min_pair_gbps"] == 3200
    assert {plane: f["min_pair_gbps"] for plane, f in bandwidth.figures["planes"].items()} == {"A": 1600, "B": 1600}
    assert bandwidth.figures["pairs_below"] == 0
    # Gomory-Hu over each plane's 6 switches: 5 max-flows per plane, not one per pair of the 32 nodes.
    assert bandwidth.figures["max_flows"] == 10 and bandwidth.figures["groups"] == 4


def test_a_plane_tree_is_worked_out_again_only_when_its_fabric_changes(demo_cluster):
    rules.forget_plane_cuts()
    assert rule(evaluate_topology(), "pair-bandwidth").figures["max_flows"] == 10
    unplug_plane("gpu005", Plane.A)  # a node's own cables: the switches' fabric is as it was
    again = rule(evaluate_topology(), "pair-bandwidth")
    assert again.figures["max_flows"] == 0 and again.figures["planes"]["A"]["min_pair_gbps"] == 0

    delete_leaf_uplinks("leaf-r03-a")  # plane A's fabric changed, B's did not
    changed = rule(evaluate_topology(), "pair-bandwidth")
    assert changed.figures["max_flows"] == 5
    assert changed.figures["planes"]["A"]["pairs_below"] > again.figures["planes"]["A"]["pairs_below"]


def test_the_switch_level_tree_agrees_with_a_gomory_hu_tree_of_the_whole_plane(demo_cluster):
    unplug_plane("gpu005", Plane.A)
    delete_leaf_uplinks("leaf-r03-a")
    cluster = build_cluster_graph()
    bandwidth = rules.pair_bandwidth(cluster)
    reference = rules.all_pairs_reference(cluster, Plane.A)
    assert len(reference) == 32 * 31 // 2
    assert {pair: bandwidth.between(Plane.A, *pair) for pair in reference} == reference
    assert reference[("gpu001", "gpu017")] == 0 and reference[("gpu001", "gpu009")] == 1600


def test_leaf_without_uplinks_cuts_its_rack_off_and_is_oversubscribed(demo_cluster):
    assert delete_leaf_uplinks("leaf-r01-a") == 32
    report = evaluate_topology()
    assert verdicts(report) == {
        **dict.fromkeys(ALL_RULES, Verdict.PASS),
        "pair-bandwidth": Verdict.FAIL,
        "leaf-oversubscription": Verdict.FAIL,
    }

    bandwidth = rule(report, "pair-bandwidth")
    assert bandwidth.offending == R01_NODES + ["leaf-r01-a"]
    assert bandwidth.figures["planes"]["A"]["min_pair_gbps"] == 0
    assert bandwidth.figures["planes"]["A"]["pairs_below"] == 8 * 24
    assert bandwidth.figures["planes"]["B"]["min_pair_gbps"] == 1600
    # Plane B still carries 1.6 Tb/s between the rack and the rest.
    assert bandwidth.figures["min_pair_gbps"] == 1600
    a, b, value = bandwidth.figures["examples"][0]
    assert value == 0 and (a in R01_NODES) != (b in R01_NODES)
    assert "leaf-r01-a" in bandwidth.detail and "plane A" in bandwidth.detail

    oversubscription = rule(report, "leaf-oversubscription")
    assert oversubscription.offending == ["leaf-r01-a"]
    assert oversubscription.figures["per_leaf"]["leaf-r01-a"] == {
        "plane": "A",
        "downlink_gbps": 12800,
        "uplink_gbps": 0,
        "ratio": None,
    }
    assert oversubscription.figures["per_leaf"]["leaf-r02-a"]["ratio"] == 1.0
    assert "no uplinks" in oversubscription.detail


def test_half_the_uplinks_gone_is_two_to_one(demo_cluster):
    Cable.objects.filter(a_switch__name="leaf-r02-b", b_switch__name="spine-b2").delete()
    cluster = build_cluster_graph()
    strict = rules.rule_leaf_oversubscription(cluster)
    assert strict.offending == ["leaf-r02-b"] and strict.figures["per_leaf"]["leaf-r02-b"]["ratio"] == 2.0
    assert strict.figures["worst_ratio"] == 2.0
    assert rules.rule_leaf_oversubscription(cluster, max_ratio=2.0).passed
    # Still 6.4 Tb/s up for 12.8 down: every pair keeps its 1.6 Tb/s per plane.
    assert rules.rule_pair_bandwidth(cluster).figures["planes"]["B"]["min_pair_gbps"] == 1600


def test_node_unplugged_from_plane_b(demo_cluster):
    assert unplug_plane("gpu005", Plane.B) == 4
    report = evaluate_topology()
    dual = rule(report, "dual-plane")
    assert dual.verdict == Verdict.FAIL and dual.offending == ["gpu005"]
    assert dual.figures["missing"] == {"gpu005": ["B"]}
    assert "plane B" in dual.detail

    bandwidth = rule(report, "pair-bandwidth")
    # Over the whole fabric gpu005 keeps plane A's 4 x 400G: the minimum drops from 3.2 to 1.6 Tb/s ...
    assert bandwidth.figures["min_pair_gbps"] == 1600 and "gpu005" in bandwidth.figures["min_pair"]
    # ... and on plane B alone it has nothing, towards each of the 31 others.
    assert bandwidth.figures["planes"]["B"] == {
        "min_pair_gbps": 0,
        "min_pair": bandwidth.figures["planes"]["B"]["min_pair"],
        "pairs_below": 31,
    }
    assert bandwidth.offending == ["gpu005"]
    # Judged over the whole fabric (no per-plane redundancy asked), 1.6 Tb/s clears 200 Gb/s.
    assert rules.rule_pair_bandwidth(report.cluster, per_plane=False).passed
    assert rule(report, "leaf-oversubscription").passed


def test_links_down_count_as_missing(demo_cluster):
    Nic.objects.filter(node__hostname="gpu020", plane=Plane.A, purpose=NicPurpose.DATA).update(link_up=False)
    report = evaluate_topology()
    dual = rule(report, "dual-plane")
    assert dual.offending == ["gpu020"] and dual.figures["missing"] == {"gpu020": ["A"]}
    assert ("node:gpu020", "switch:leaf-r03-a") in dual.links
    assert rule(report, "pair-bandwidth").offending == ["gpu020"]


def test_bandwidth_threshold_is_a_parameter(demo_cluster):
    cluster = build_cluster_graph()
    strict = rules.rule_pair_bandwidth(cluster, threshold_gbps=2000)
    assert not strict.passed and strict.figures["pairs_below"] == 2 * (32 * 31 // 2)
    assert sorted(strict.offending) == sorted(
        [f"gpu{n:03d}" for n in range(1, 33)] + [f"leaf-r{r:02d}-{p}" for r in range(1, 5) for p in "ab"]
    )
    assert rules.rule_pair_bandwidth(cluster, threshold_gbps=2000, per_plane=False).passed
    assert not rules.rule_pair_bandwidth(cluster, threshold_gbps=4000, per_plane=False).passed


def test_one_nic_at_mtu_1500(demo_cluster):
    port = nic("gpu007", "ens3np0")
    port.mtu = 1500
    port.save()
    mtu = rule(evaluate_topology(), "data-mtu")
    assert mtu.verdict == Verdict.FAIL
    assert mtu.offending == ["gpu007:ens3np0"]
    assert mtu.figures["nodes_with_mixed_mtu"] == ["gpu007"]
    assert mtu.figures["inconsistent_planes"] == ["A"]
    assert mtu.figures["per_plane"]["A"] == {"1500": 1, "9000": 32 * 4 + 3 - 1}
    assert mtu.links == [("node:gpu007", "switch:leaf-r01-a")]
    assert "gpu007:ens3np0 (1500)" in mtu.detail


def test_gpu_without_its_pcie_peer_nics_is_a_warning(demo_cluster):
    # GPU0 and GPU1 of gpu003 share PEX0 with ens1np0 and ens2np0; without them they reach a NIC only via the CPU.
    Nic.objects.filter(node__hostname="gpu003", name__in=["ens1np0", "ens2np0"]).delete()
    affinity = rule(evaluate_topology(), "gpu-nic-affinity")
    assert affinity.verdict == Verdict.WARN and not affinity.passed
    assert affinity.offending == ["gpu003 GPU0", "gpu003 GPU1"]
    assert affinity.figures["numa_only"] == ["gpu003 GPU0", "gpu003 GPU1"]
    assert affinity.figures["pcie_switch_peers"] == 254


def test_recorded_peers_count_when_pcie_switch_names_are_unknown(demo_cluster):
    Gpu.objects.filter(node__hostname="gpu011").update(pcie_switch="")
    Nic.objects.filter(node__hostname="gpu011").update(pcie_switch="")
    assert rule(evaluate_topology(), "gpu-nic-affinity").passed
    gpu = Gpu.objects.get(node__hostname="gpu011", index=4)
    gpu.peer_nics.clear()
    affinity = rule(evaluate_topology(), "gpu-nic-affinity")
    assert affinity.offending == ["gpu011 GPU4"] and affinity.verdict == Verdict.WARN


def test_gpu_with_no_nic_on_its_numa_node_fails(demo_cluster):
    Nic.objects.filter(node__hostname="gpu012", purpose=NicPurpose.DATA, numa_node=1).delete()
    affinity = rule(evaluate_topology(), "gpu-nic-affinity")
    assert affinity.verdict == Verdict.FAIL
    assert affinity.figures["no_local_nic"] == [f"gpu012 GPU{i}" for i in range(4, 8)]


def test_storage_tier_below_its_requirement(demo_cluster):
    StorageTier.objects.filter(name="Hot NVMe RAID").update(bandwidth_gb_per_s=Decimal("15"))
    storage = rule(evaluate_topology(), "storage-bandwidth")
    assert storage.verdict == Verdict.FAIL and storage.offending == ["Hot NVMe RAID"]
    assert storage.figures["per_tier"]["Hot NVMe RAID"]["bandwidth_gbytes_s"] == 15
    assert "needs 20 GB/s" in storage.detail
    assert list(storage.figures["per_tier"]) == ["Hot NVMe RAID", "Warm SAS SSD", "Cold object store"]


def test_nothing_to_check_is_never_a_pass(db):
    report = evaluate_topology()
    assert set(verdicts(report).values()) == {Verdict.COULD_NOT_RUN}
    assert not report.passed


def test_nodes_do_not_forward_traffic_between_leaves(db):
    """Rail-style cabling: two hosts on both leaves of a plane must not become a path between the leaves."""
    site = factories.make_site()
    leaf1 = factories.make_switch(site=site, name="rail1")
    leaf2 = factories.make_switch(site=site, name="rail2")
    factories.make_switch(site=site, name="spine-x", tier=SwitchTier.SPINE)  # no cables: the leaves are apart
    hosts = {name: factories.make_node(hostname=name, status="ready") for name in ["h1", "h2", "h3", "h4"]}
    for host, leaves in {"h1": [leaf1, leaf2], "h2": [leaf1], "h3": [leaf1, leaf2], "h4": [leaf2]}.items():
        for i, leaf in enumerate(leaves):
            port = factories.make_nic(node=hosts[host], name=f"ens{i + 1}np0")
            Cable.objects.create(a_nic=port, b_switch=leaf, b_port=f"swp-{host}-{i}", speed_gbps=400, plane=Plane.A)
    cluster = build_cluster_graph()
    bandwidth = rules.pair_bandwidth(cluster)
    assert bandwidth.between(Plane.A, "h2", "h4") == 0  # a graph with h1/h3 as vertices would say 800
    assert bandwidth.between(Plane.A, "h1", "h3") == 800
    assert bandwidth.between(Plane.A, "h1", "h2") == 400
    assert bandwidth.between(Plane.A, "h1", "h4") == 400
    result = rules.rule_pair_bandwidth(cluster)
    assert not result.passed and result.figures["planes"]["A"]["pairs_below"] == 1
