"""The demo's rack-scale racks: each a whole GB200 NVL72 beside the H200 racks, loaded again without change."""

import pytest
from django.core.management import CommandError, call_command

from apps.inventory.catalogue import RACK_SYSTEMS
from apps.inventory.demo import TRAY_NICS_PER_PLANE, ClusterShape, load_cluster
from apps.inventory.models import (
    Cable,
    Gpu,
    ImexDomain,
    LeakSensor,
    Nic,
    Node,
    NvlinkDomain,
    NvlinkPartition,
    NvlinkSwitchTray,
    Pdu,
    PowerShelf,
    Switch,
)
from apps.inventory.rackscale import domain_problems

pytestmark = pytest.mark.django_db

NVL72 = RACK_SYSTEMS["GB200 NVL72"]
SHAPE = ClusterShape(compute_nodes=8, rack_scale_racks=1)


def test_a_rack_scale_rack_is_a_whole_nvl72_domain():
    load_cluster(SHAPE)

    domain = NvlinkDomain.objects.get()
    assert (domain.name, domain.rack.name, domain.system) == ("nvl01", "nvl01", "GB200 NVL72")
    trays = Node.objects.filter(nvlink_domain=domain)
    assert sorted(trays.values_list("tray_slot", flat=True)) == list(range(1, 19))
    assert trays.filter(hostname="nvl01-t01", cpu_model="NVIDIA Grace", cpu_sockets=2, cpu_cores=144).exists()
    gpus = Gpu.objects.filter(node__in=trays)
    assert gpus.count() == 72 and set(gpus.values_list("sku__name", flat=True)) == {"GB200"}
    assert len(set(gpus.values_list("uuid", flat=True))) == 72
    assert list(gpus.filter(node__hostname="nvl01-t01").values_list("numa_node", flat=True)) == [0, 0, 1, 1]
    assert Nic.objects.filter(node__in=trays, purpose="data", speed_gbps=400).count() == 72
    # Two ConnectX-7 a tray on each plane's leaf of the rack's own.
    cabled = Cable.objects.filter(a_nic__node__in=trays)
    assert cabled.count() == 72 and set(cabled.values_list("b_switch__name", flat=True)) == {
        "leaf-nvl01-a",
        "leaf-nvl01-b",
    }
    assert NvlinkSwitchTray.objects.filter(domain=domain).count() == NVL72.switch_trays
    assert PowerShelf.objects.filter(rack=domain.rack).count() == NVL72.power_shelves
    assert not Pdu.objects.filter(rack=domain.rack).exists()
    assert LeakSensor.objects.filter(loop__rack=domain.rack, node__isnull=False).count() == 18
    assert LeakSensor.objects.filter(loop__rack=domain.rack, switch_tray__isnull=False).count() == 9
    assert ImexDomain.objects.get(domain=domain).nodes.count() == 18
    assert NvlinkPartition.objects.get(domain=domain).nodes.count() == 18
    assert domain_problems() == []


def test_every_tray_shelf_and_leaf_fits_the_rack_without_overlap():
    load_cluster(SHAPE)

    domain = NvlinkDomain.objects.get()
    used = []
    for node in Node.objects.filter(nvlink_domain=domain):
        node.full_clean()
        used.append(node.u_position)
    for tray in [*NvlinkSwitchTray.objects.filter(domain=domain), *PowerShelf.objects.filter(rack=domain.rack)]:
        tray.full_clean()
        used.append(tray.position)
    leaves = Switch.objects.filter(rack=domain.rack).order_by("name")
    assert [(leaf.name, leaf.position) for leaf in leaves] == [("leaf-nvl01-a", 48), ("leaf-nvl01-b", 47)]
    for leaf in leaves:
        leaf.full_clean()
        used.append(leaf.position)
    assert len(used) == len(set(used)) == 18 + 9 + 8 + 2
    assert max(used) <= domain.rack.u_height


def test_a_demo_loaded_with_its_nvl72_leaves_unplaced_places_them_when_loaded_again():
    load_cluster(SHAPE)
    Switch.objects.filter(name__startswith="leaf-nvl01-").update(position=None)

    load_cluster(SHAPE)

    assert not Switch.objects.filter(name__startswith="leaf-nvl01-", position__isnull=True).exists()


def test_a_demo_loaded_before_its_switch_trays_had_bmc_addresses_gets_them_when_loaded_again():
    load_cluster(SHAPE)
    NvlinkSwitchTray.objects.update(bmc_address="")

    load_cluster(SHAPE)

    assert NvlinkSwitchTray.objects.get(name="nvl01-sw9").bmc_address == "10.24.0.9"
    assert not NvlinkSwitchTray.objects.filter(bmc_address="").exists()


def test_loading_again_adds_nothing():
    load_cluster(SHAPE)
    models = (Node, Gpu, Nic, NvlinkSwitchTray, PowerShelf, LeakSensor, Pdu)
    counts = [model.objects.count() for model in models]
    created = load_cluster(SHAPE)
    assert [model.objects.count() for model in models] == counts
    assert not any(created.values())


def test_load_demo_adds_one_rack_scale_rack_by_default(capsys):
    call_command("load_demo", "--nodes", "8")
    assert NvlinkDomain.objects.count() == 1
    call_command("load_demo", "--nodes", "8", "--rack-scale", "0")
    assert "nothing to add" in capsys.readouterr().out


def test_load_demo_refuses_a_rack_scale_count_it_cannot_build():
    with pytest.raises(CommandError, match="--rack-scale -1"):
        call_command("load_demo", "--rack-scale", "-1")
    assert not Node.objects.exists()


def test_the_demo_with_a_rack_scale_rack_passes_every_topology_rule():
    from apps.topology.services import evaluate_topology

    load_cluster(ClusterShape(rack_scale_racks=1))

    failing = {
        result.name: (result.detail, result.offending[:5]) for result in evaluate_topology().rules if not result.passed
    }
    assert failing == {}


def test_growing_the_h200_racks_beside_an_nvl72_rack_moves_its_uplinks_and_every_rule_still_passes(capsys):
    """`load_demo` then `load_demo --nodes 128`: more racks take more of each spine's first ports and more spines
    spread every uplink, so the NVL72 leaves' uplinks move as the H200 leaves' do (it failed on a port in use)."""
    from apps.topology.services import evaluate_topology

    call_command("load_demo")
    tray_rails = dict(Cable.objects.filter(a_nic__node__hostname="nvl01-t01").values_list("a_nic__name", "pk"))
    call_command("load_demo", "--nodes", "128")  # 16 racks: eight spines a plane, not two

    assert "cables replaced" in capsys.readouterr().out
    assert dict(Cable.objects.filter(a_nic__node__hostname="nvl01-t01").values_list("a_nic__name", "pk")) == tray_rails
    spines = set(Switch.objects.filter(tier="spine", plane="A").values_list("name", flat=True))
    nvl_uplinks = Cable.objects.filter(a_switch__name="leaf-nvl01-a", b_switch__tier="spine")
    assert nvl_uplinks.count() == NVL72.compute_trays * TRAY_NICS_PER_PLANE and len(spines) == 8  # non-blocking
    assert set(nvl_uplinks.values_list("b_switch__name", flat=True)) == spines
    ports = Cable.objects.filter(b_switch__tier="spine").values_list("b_switch__name", "b_port")
    assert len(ports) == len(set(ports))
    failing = {r.name: r.detail for r in evaluate_topology().rules if not r.passed}
    assert failing == {}
