import pytest
from django.core.management import CommandError, call_command

from apps.inventory import demo
from apps.inventory.choices import FirmwareComponent, NicPurpose, NodeRole, Plane, StorageTierKind
from apps.inventory.models import Cable, Firmware, Gpu, Nic, Node, StorageTier, Switch
from apps.inventory.models.nodes import mac_validator

pytestmark = pytest.mark.django_db


def test_demo_is_the_briefs_case_study(demo_cluster):
    compute = Node.objects.filter(role=NodeRole.COMPUTE)
    assert compute.count() == 32
    assert Gpu.objects.filter(node__in=compute, sku__name="H200 SXM").count() == 256
    assert Node.objects.filter(role=NodeRole.COMPUTE).values("rack").distinct().count() == 4
    assert Node.objects.filter(role=NodeRole.MANAGEMENT).count() == 3
    data = Nic.objects.filter(node__role=NodeRole.COMPUTE, purpose=NicPurpose.DATA)
    assert data.count() == 256
    assert data.filter(plane=Plane.A, speed_gbps=400, mtu=9000, transport="roce").count() == 128
    assert data.filter(plane=Plane.B).count() == 128
    assert Nic.objects.filter(node__role=NodeRole.COMPUTE, purpose=NicPurpose.MANAGEMENT).count() == 32
    assert set(Switch.objects.values_list("plane", "tier").distinct()) >= {
        ("A", "leaf"),
        ("B", "leaf"),
        ("A", "spine"),
        ("B", "spine"),
    }
    tiers = {tier.kind: tier for tier in StorageTier.objects.all()}
    assert tiers[StorageTierKind.HOT].bandwidth_gb_per_s >= 20
    assert 5 <= tiers[StorageTierKind.WARM].bandwidth_gb_per_s <= 10
    assert tiers[StorageTierKind.COLD].capacity_tb >= 100
    every_nic_cabled = Cable.objects.filter(a_nic__isnull=False).count()
    assert every_nic_cabled == Nic.objects.count()


def test_one_node_is_one_bios_version_behind(demo_cluster):
    versions = Firmware.objects.filter(component=FirmwareComponent.BIOS).values_list("node__hostname", "version")
    behind = [(host, version) for host, version in versions if version != "2.4.1"]
    assert behind == [("gpu017", "2.3.5")]


def test_load_demo_is_idempotent(db):
    call_command("load_demo")
    counts = [model.objects.count() for model in (Node, Gpu, Nic, Cable, Firmware)]
    call_command("load_demo")
    assert [model.objects.count() for model in (Node, Gpu, Nic, Cable, Firmware)] == counts


def test_load_demo_grows_the_cluster_to_a_bigger_fabric_and_keeps_what_did_not_move(db, capsys):
    from apps.topology.graph import build_cluster_graph
    from apps.topology.rules import rule_leaf_oversubscription

    call_command("load_demo", "--rack-scale", "0")  # H200 racks alone: growing them moves the NVL72 leaves' ports
    gpu001_rails = dict(Cable.objects.filter(a_nic__node__hostname="gpu001").values_list("a_nic__name", "pk"))
    # 12 racks: two spines a plane would need 192 ports each
    call_command("load_demo", "--nodes", "96", "--rack-scale", "0")

    assert "cables replaced" in capsys.readouterr().out
    assert Node.objects.filter(role=NodeRole.COMPUTE).count() == 96
    assert Cable.objects.filter(a_nic__isnull=False).count() == Nic.objects.count()
    assert dict(Cable.objects.filter(a_nic__node__hostname="gpu001").values_list("a_nic__name", "pk")) == gpu001_rails
    spines = Switch.objects.filter(tier="spine", plane=Plane.A)
    assert spines.count() == 4
    for leaf in Switch.objects.filter(tier="leaf", plane=Plane.A):
        uplinks = Cable.objects.filter(a_switch=leaf, b_switch__in=spines)
        assert uplinks.count() == 32
        assert set(uplinks.values_list("b_switch__name", flat=True)) == set(spines.values_list("name", flat=True))
    ports = Cable.objects.filter(b_switch__tier="spine").values_list("b_switch__name", "b_port")
    assert len(ports) == len(set(ports))
    assert max(int(port.removeprefix("swp")) for _, port in ports) <= 128
    assert rule_leaf_oversubscription(build_cluster_graph()).verdict == "pass"


def test_load_demo_refuses_a_size_it_cannot_build(db):
    with pytest.raises(CommandError, match="--nodes 0"):
        call_command("load_demo", "--nodes", "0")
    assert not Node.objects.exists()


def test_a_fleet_past_two_tiers_gets_pods_and_a_core_with_real_switch_counts():
    from apps.inventory.demo import ClusterShape

    fleet = ClusterShape(compute_nodes=2048)  # 256 racks of 8: one layer of 128-port spines holds 124
    assert (fleet.three_tier, fleet.pods, fleet.racks_per_pod, fleet.spines) == (True, 4, 64, 32)
    # Per plane: 4 pods x 32 spines x 64 uplinks = 8,192 core ports, 124 usable on each core (4 kept for management).
    assert fleet.cores == 67
    assert ClusterShape(compute_nodes=992).three_tier is False  # today's limit keeps today's fabric
    assert ClusterShape(compute_nodes=10_000).pods == 20


def test_a_shape_no_fabric_can_hold_is_refused_naming_the_limit():
    from apps.inventory.demo import ClusterShape

    with pytest.raises(ValueError, match=r"compute_nodes 100000: .* at most 124 pods of 64 racks, 63,488 nodes"):
        ClusterShape(compute_nodes=100_000)
    with pytest.raises(ValueError, match="nodes_per_rack 17"):
        ClusterShape(compute_nodes=100, nodes_per_rack=17)
    with pytest.raises(ValueError, match="spines_per_plane 1"):
        ClusterShape(compute_nodes=64, spines_per_plane=1)


def test_a_three_tier_fabric_is_cabled_non_blocking_at_every_tier(db):
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.topology.graph import build_cluster_graph
    from apps.topology.rules import rule_leaf_oversubscription

    # One node per rack keeps the test small: 4 uplinks per leaf, so two tiers hold 124 racks and this is 2 pods.
    shape = ClusterShape(compute_nodes=130, nodes_per_rack=1, management_nodes=1)
    assert (shape.pods, shape.spines, shape.spine_uplinks, shape.cores) == (3, 4, 64, 7)
    load_cluster(ClusterShape(compute_nodes=8, nodes_per_rack=1, management_nodes=1))  # two tiers, then grown
    assert Switch.objects.filter(name="spine-a1").exists()
    load_cluster(shape)

    assert not Switch.objects.filter(name__in=["spine-a1", "spine-b1"]).exists()  # the two-tier spines retired

    ends = list(Cable.objects.filter(b_switch__isnull=False).values_list("b_switch__name", "b_port"))
    ends += list(Cable.objects.filter(a_switch__isnull=False).values_list("a_switch__name", "a_port"))
    assert len(ends) == len(set(ends))
    assert max(int(port.removeprefix("swp")) for name, port in ends if name != "mgmt-sw01") <= 128
    spine = Switch.objects.get(name="spine-p02-a3")
    down = Cable.objects.filter(b_switch=spine, a_switch__tier="leaf").count()
    up = Cable.objects.filter(a_switch=spine, b_switch__tier="core").count()
    assert (down, up) == (64, 64)
    assert Cable.objects.filter(b_switch__name="core-b1", a_switch__isnull=False).count() == 3 * (124 // 3)
    for core in Switch.objects.filter(tier="core", plane=Plane.A):
        pods = Cable.objects.filter(b_switch=core).exclude(a_switch=None).values_list("a_switch__name", flat=True)
        per_pod = {pod: sum(1 for name in pods if name.startswith(f"spine-{pod}-")) for pod in ("p01", "p02", "p03")}
        assert len(set(per_pod.values())) == 1, (core.name, per_pod)  # every pod as many links into each core
    assert Cable.objects.filter(a_nic__node__hostname="mgmt01", b_switch__name="core-a1", b_port="swp128").exists()
    assert rule_leaf_oversubscription(build_cluster_graph()).verdict == "pass"


def test_nvl72_racks_beside_a_three_tier_fabric_get_a_pod_of_their_own_joined_to_the_cores(db):
    """load_demo --nodes 2048 keeps the demo's NVL72 rack: grown past two tiers, its leaves move from the old spines to
    a pod of their own whose spines join the cores as the H200 pods' do."""
    from apps.inventory.demo import ClusterShape, load_cluster
    from apps.topology.graph import build_cluster_graph
    from apps.topology.rules import rule_leaf_oversubscription

    load_cluster(ClusterShape(compute_nodes=8, nodes_per_rack=1, management_nodes=1, rack_scale_racks=1))
    assert Cable.objects.filter(a_switch__name="leaf-nvl01-a", b_switch__name="spine-a1").exists()
    shape = ClusterShape(compute_nodes=130, nodes_per_rack=1, management_nodes=1, rack_scale_racks=1)
    assert (shape.pods, shape.fabric_pods, shape.spines, shape.columns_per_core) == (3, 4, 4, 31)
    load_cluster(shape)

    assert not Switch.objects.filter(name__in=["spine-a1", "spine-b1"]).exists()
    ends = list(Cable.objects.filter(b_switch__isnull=False).values_list("b_switch__name", "b_port"))
    ends += list(Cable.objects.filter(a_switch__isnull=False).values_list("a_switch__name", "a_port"))
    assert len(ends) == len(set(ends))
    assert max(int(port.removeprefix("swp")) for name, port in ends if name != "mgmt-sw01") <= 128
    up = Cable.objects.filter(a_switch__name="leaf-nvl01-a").values_list("b_switch__name", flat=True)
    assert sorted(set(up)) == [f"spine-p04-a{j}" for j in range(1, 5)] and len(up) == 36
    for spine in Switch.objects.filter(name__startswith="spine-p04-"):
        down = Cable.objects.filter(b_switch=spine, a_switch__tier="leaf").count()
        cores = Cable.objects.filter(a_switch=spine, b_switch__tier="core").count()
        assert down == 9 and cores == 9, (spine.name, down, cores)
    # An H200 pod's spines keep their uplinks into every core; the cores hold a port per pod and column.
    assert Cable.objects.filter(a_switch__name="spine-p02-a3", b_switch__tier="core").count() == 64
    assert rule_leaf_oversubscription(build_cluster_graph()).verdict == "pass"


def test_a_shape_denser_than_its_racks_are_tall_leaves_the_nodes_past_the_top_unplaced(db):
    """bench/api_nodes.py's 100,000 nodes are 16 a rack (8 a rack stops at 63,488): the 4U nodes fill a 48U rack to
    U46 and the rest are in the rack, not placed, so no two overlap."""
    from apps.inventory.demo import ClusterShape, load_cluster

    load_cluster(ClusterShape(compute_nodes=16, nodes_per_rack=16, management_nodes=0))

    placed = dict(Node.objects.filter(rack__name="r01").values_list("hostname", "u_position"))
    assert [placed[f"gpu{n:03d}"] for n in range(1, 12)] == list(range(3, 47, 4))
    assert {placed[f"gpu{n:03d}"] for n in range(12, 17)} == {None}


def test_a_fleet_of_100000_nodes_has_an_address_of_its_own_for_every_nic_and_node():
    """The node-list bench loads 100,000 nodes: past 32,767 the compute nodes' MAC numbers met the management nodes'
    and the NVL72 trays', past 65,535 their addresses wrapped round (a unique-constraint error at load)."""
    nodes = range(1, 100_001)
    macs = {demo._compute_mac(n, port) for n in nodes for port in (0, 1, 8)}
    others = {demo._mac(number, port) for number in (0x8001, 0x8003, 0xC000 + 1, 0xC000 + 18 * 8) for port in (0, 1)}
    assert len(macs) == 3 * len(nodes) and not macs & others
    assert all(mac_validator.regex.match(mac) for mac in (demo._compute_mac(100_000, 8), *others))
    management = {demo._ip(10, n) for n in nodes}
    bmcs = {demo._ip(20, n) for n in nodes}
    others = {demo._ip(second, number) for second in (11, 12, 21, 22, 23) for number in range(1, 300)}
    assert len(management) == len(bmcs) == len(nodes) and not management & bmcs and not (management | bmcs) & others
    assert demo._ip(10, 1) == "10.10.0.1" and demo._compute_mac(1, 0) == "0c:42:a1:00:01:00"  # the demo's as they were


@pytest.mark.parametrize("compute_nodes", [32, 2048, 100_000])
def test_the_management_network_has_a_port_of_its_own_for_every_node_on_switches_of_real_size(compute_nodes):
    """One management switch held every node's port: 100,016 of them at 100,000 nodes, past what a switch's port
    count can be (a smallint), and unlike any real network. Now one switch for each 4,000 compute nodes."""
    shape = demo.ClusterShape(compute_nodes=compute_nodes, nodes_per_rack=8 if compute_nodes < 63_488 else 16)
    loader = demo._Loader(shape)
    ends = [loader.management_port(n) for n in range(1, compute_nodes + 1)]
    ends += [loader.management_port(m, management_node=True) for m in range(1, shape.management_nodes + 1)]
    ports = {
        demo.management_switch_name(k): loader._management_ports(k) for k in range(1, 1 + loader._management_switches())
    }

    assert len(set(ends)) == len(ends)
    assert all(1 <= int(port.removeprefix("swp")) <= ports[switch] <= 4_096 for switch, port in ends)
    assert len(ports) == -(-compute_nodes // 4_000)
    if compute_nodes == 32:  # the demo's as it was
        assert ports == {"mgmt-sw01": 48} and ends[16] == ("mgmt-sw01", "swp17")
