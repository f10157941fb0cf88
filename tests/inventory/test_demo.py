import pytest
from django.core.management import CommandError, call_command

from apps.inventory.choices import FirmwareComponent, NicPurpose, NodeRole, Plane, StorageTierKind
from apps.inventory.models import Cable, Firmware, Gpu, Nic, Node, StorageTier, Switch

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
    assert tiers[StorageTierKind.HOT].bandwidth_gbps >= 20
    assert 5 <= tiers[StorageTierKind.WARM].bandwidth_gbps <= 10
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

    call_command("load_demo", "--rack-scale", "0")  # the H200 fabric alone: NVL72 trays are not cabled to it
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
