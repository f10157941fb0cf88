"""GPUs, NICs, switches and cables over the API: the fabric's facts, and the mistakes the API refuses."""

import pytest

from apps.core.choices import AuditAction, ChangeSource
from apps.core.models import AuditEntry
from apps.inventory.choices import GpuHealth, Plane
from apps.inventory.models import Cable, Gpu, Nic, Node, Switch
from tests import factories
from tests.inventory.factories import make_cable

pytestmark = pytest.mark.django_db


def nic_payload(node, **fields) -> dict:
    return {
        "node": node.hostname,
        "name": "ens9np0",
        "mac": "0c:42:a1:ff:00:01",
        "speed_gbps": 400,
        "mtu": 9000,
        "rdma_capable": True,
        "transport": "roce",
        "plane": "A",
        "pfc_priorities": [3],
        "ecn_enabled": True,
    } | fields


# NICs


def test_admins_create_a_nic_by_node_hostname_with_its_peer_gpus(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    gpus = list(node.gpus.order_by("index")[:2])
    payload = nic_payload(node, peer_gpus=[str(gpu.public_id) for gpu in gpus])
    response = api_as(admin).post("/api/nics/", payload, format="json")
    assert response.status_code == 201, response.data
    assert response.data["node"]["display"] == "gpu001"
    assert [gpu["display"] for gpu in response.data["peer_gpus"]] == ["gpu001 GPU0", "gpu001 GPU1"]
    nic = Nic.objects.get(node=node, name="ens9np0")
    assert set(nic.peer_gpus.all()) == set(gpus) and nic.pfc_priorities == [3]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"mtu": 9300}, "mtu"),
        ({"mtu": 67}, "mtu"),
        ({"speed_gbps": -400}, "speed_gbps"),
        ({"speed_gbps": 0}, "speed_gbps"),
        ({"mac": "0c:42:a1:zz:00:01"}, "mac"),
        ({"mac": "0c:42:a1:00:01:01"}, "mac"),  # gpu001's ens1np0 has it
        ({"name": "ens1np0"}, "non_field_errors"),  # gpu001 already has an ens1np0
        ({"name": "eth0; reboot"}, "name"),
        ({"pfc_priorities": [3, 9]}, "pfc_priorities"),
        ({"pfc_priorities": [3, 3]}, "pfc_priorities"),
        ({"transport": "roce", "rdma_capable": False}, "rdma_capable"),
        ({"node": "gpu999"}, "node"),
        ({"plane": "C"}, "plane"),
    ],
)
def test_bad_nics_are_refused_naming_the_field(api_as, admin, demo_cluster, fields, field):
    node = Node.objects.get(hostname="gpu001")
    before = Nic.objects.count()
    response = api_as(admin).post("/api/nics/", nic_payload(node) | fields, format="json")
    assert response.status_code == 400
    assert list(response.data) == [field], response.data
    assert Nic.objects.count() == before


def test_an_mtu_out_of_range_changes_nothing(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")
    response = api_as(admin).patch(f"/api/nics/{nic.public_id}/", {"mtu": 9300}, format="json")
    assert response.status_code == 400
    assert "9216" in response.data["mtu"][0]
    nic.refresh_from_db()
    assert nic.mtu == 9000
    assert not AuditEntry.objects.for_object(nic).exists()


def test_peer_gpus_must_sit_in_the_same_node(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")
    stranger = Gpu.objects.get(node__hostname="gpu002", index=0)
    response = api_as(admin).patch(
        f"/api/nics/{nic.public_id}/", {"peer_gpus": [str(stranger.public_id)]}, format="json"
    )
    assert response.status_code == 400
    assert "gpu002 GPU0" in response.data["peer_gpus"][0]
    assert stranger not in nic.peer_gpus.all()


def test_a_nic_change_is_audited_as_the_token_user(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")
    assert api_as(admin).patch(f"/api/nics/{nic.public_id}/", {"mtu": 1500}, format="json").status_code == 200
    entry = AuditEntry.objects.for_object(nic).get()
    assert (entry.actor, entry.source, entry.action) == (admin, ChangeSource.API, AuditAction.UPDATE)
    assert entry.changes == {"mtu": [9000, 1500]}


@pytest.mark.parametrize(
    ("params", "count"),
    [
        ({"node": "gpu001"}, 9),
        ({"node": "gpu001", "purpose": "management"}, 1),
        ({"plane": "B", "node": "mgmt01"}, 1),
        ({"mtu": 1500}, 35),
        ({"transport": "roce", "mtu": 9000}, 32 * 8 + 3 * 2),
    ],
)
def test_nic_filters(api_as, viewer, demo_cluster, params, count):
    response = api_as(viewer).get("/api/nics/", params)
    assert response.status_code == 200
    assert response.data["count"] == count


@pytest.mark.parametrize(
    ("params", "field"), [({"mtu": "jumbo"}, "mtu"), ({"node": "gpu999"}, "node"), ({"purpose": "fun"}, "purpose")]
)
def test_bad_nic_filters_are_400(api_as, viewer, demo_cluster, params, field):
    response = api_as(viewer).get("/api/nics/", params)
    assert response.status_code == 400 and list(response.data) == [field]


def test_the_nic_list_has_constant_queries(api_as, viewer, demo_cluster, django_assert_max_num_queries):
    client = api_as(viewer)
    with django_assert_max_num_queries(4):  # token, count, page, peer GPUs
        response = client.get("/api/nics/", {"limit": 100})
    assert len(response.data["results"]) == 100


# GPUs


def test_gpu_filters(api_as, viewer, demo_cluster):
    Gpu.objects.filter(node__hostname="gpu002", index=5).update(health=GpuHealth.FAILED)
    client = api_as(viewer)
    assert client.get("/api/gpus/", {"node": "gpu002"}).data["count"] == 8
    failed = client.get("/api/gpus/", {"health": "failed"}).data
    assert [gpu["display"] for gpu in failed["results"]] == ["gpu002 GPU5"]
    assert client.get("/api/gpus/", {"sku": "H200 SXM"}).data["count"] == 256
    assert client.get("/api/gpus/", {"sku": "L40S"}).data["count"] == 0
    assert list(client.get("/api/gpus/", {"health": "sick"}).data) == ["health"]


def test_admins_add_a_gpu_and_a_duplicate_index_is_refused(api_as, admin, demo_cluster):
    node = factories.make_node(hostname="spare01")
    client = api_as(admin)
    payload = {"node": str(node.public_id), "index": 0, "sku": "H100 SXM", "health": "healthy"}
    created = client.post("/api/gpus/", payload, format="json")
    assert created.status_code == 201, created.data
    assert created.data["sku"]["display"] == "H100 SXM"
    again = client.post("/api/gpus/", payload, format="json")
    assert again.status_code == 400
    assert "already has a GPU with this index" in str(again.data)
    assert node.gpus.count() == 1
    bad = client.post("/api/gpus/", {**payload, "index": 16}, format="json")
    assert bad.status_code == 400 and list(bad.data) == ["index"]


# Switches and cables


def test_switch_filters(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    spines = client.get("/api/switches/", {"tier": "spine", "plane": "A"}).data
    assert [row["name"] for row in spines["results"]] == ["spine-a1", "spine-a2"]
    assert client.get("/api/switches/", {"plane": "mgmt"}).data["count"] == 1
    assert client.get("/api/switches/", {"tier": "core"}).data["count"] == 0  # a tier only three-tier fabrics have
    assert list(client.get("/api/switches/", {"tier": "border"}).data) == ["tier"]


def test_switch_speed_must_be_positive(api_as, admin, demo_cluster):
    payload = {"name": "leaf-x", "site": "demo-dc", "plane": "A", "tier": "leaf", "port_count": 64}
    response = api_as(admin).post("/api/switches/", {**payload, "port_speed_gbps": -1}, format="json")
    assert response.status_code == 400 and list(response.data) == ["port_speed_gbps"]
    created = api_as(admin).post("/api/switches/", {**payload, "port_speed_gbps": 400}, format="json")
    assert created.status_code == 201, created.data
    assert created.data["site"]["display"] == "Demo DC"


def cable_to(switch: Switch, port: str, **fields) -> dict:
    nic = factories.make_nic()
    return {"a_nic": str(nic.public_id), "b_switch": switch.name, "b_port": port, "speed_gbps": 400, **fields}


def test_admins_cable_a_nic_to_a_free_switch_port(api_as, admin, demo_cluster):
    leaf = Switch.objects.get(name="leaf-r01-a")
    response = api_as(admin).post("/api/cables/", cable_to(leaf, "swp100", plane="A"), format="json")
    assert response.status_code == 201, response.data
    assert response.data["b_switch"]["display"] == "leaf-r01-a"
    assert response.data["display"].endswith("↔ leaf-r01-a:swp100")
    assert Cable.objects.filter(b_switch=leaf, b_port="swp100").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"b_port": "swp1"}, "b_port"),  # gpu001's ens1np0 is on leaf-r01-a:swp1
        ({"speed_gbps": -400}, "speed_gbps"),
        ({"b_port": ""}, "b_port"),
        ({"b_port": "swp 1"}, "b_port"),
        ({"b_switch": "leaf-r99-a"}, "b_switch"),
        ({"a_switch": "leaf-r01-b", "a_port": "swp120"}, "a_nic"),  # end A is a NIC and a switch port
        ({"medium": "string"}, "medium"),
    ],
)
def test_bad_cables_are_refused_naming_the_field(api_as, admin, demo_cluster, change, field):
    leaf = Switch.objects.get(name="leaf-r01-a")
    before = Cable.objects.count()
    response = api_as(admin).post("/api/cables/", {**cable_to(leaf, "swp100"), **change}, format="json")
    assert response.status_code == 400
    assert list(response.data) == [field], response.data
    assert Cable.objects.count() == before


def test_a_nic_takes_one_cable_whichever_end_it_is(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")  # cabled as end A
    leaf = Switch.objects.get(name="leaf-r01-a")
    payload = {"a_switch": leaf.name, "a_port": "swp101", "b_nic": str(nic.public_id), "speed_gbps": 400}
    response = api_as(admin).post("/api/cables/", payload, format="json")
    assert response.status_code == 400
    assert response.data == {"b_nic": ["This port already has a cable."]}


def test_moving_a_cable_onto_a_taken_port_is_refused(api_as, admin, demo_cluster):
    cable = make_cable(b_switch=Switch.objects.get(name="leaf-r01-a"), b_port="swp100")
    response = api_as(admin).patch(f"/api/cables/{cable.public_id}/", {"b_port": "swp2"}, format="json")
    assert response.status_code == 400 and list(response.data) == ["b_port"]
    cable.refresh_from_db()
    assert cable.b_port == "swp100"


def test_cable_filters(api_as, viewer, demo_cluster, django_assert_max_num_queries):
    client = api_as(viewer)
    with django_assert_max_num_queries(4):  # token, the switch named, count, page
        on_leaf = client.get("/api/cables/", {"switch": "leaf-r01-a", "limit": 100})
    # 32 node links down (8 nodes x 4 NICs on plane A) and as many uplinks to the plane's spines.
    assert on_leaf.data["count"] == 64
    spine = client.get("/api/cables/", {"switch": "spine-a1"}).data["count"]
    assert spine == 4 * 32 // 2 + 3  # half of every plane-A leaf's uplinks, and the management nodes
    assert client.get("/api/cables/", {"plane": Plane.MANAGEMENT}).data["count"] == 35
    assert client.get("/api/cables/", {"node": "gpu001"}).data["count"] == 9
    assert list(client.get("/api/cables/", {"switch": "leaf-r99-a"}).data) == ["switch"]
