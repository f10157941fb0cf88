import pytest
from django.core.management import call_command

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
