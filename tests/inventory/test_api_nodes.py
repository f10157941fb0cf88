"""The node endpoints: the list automation polls, the detail an on-call engineer reads, and changes by admins."""

from datetime import UTC, datetime

import pytest

from apps.core.choices import AuditAction, ChangeSource
from apps.core.models import AuditEntry
from apps.inventory.choices import GpuHealth, NodeStatus, PowerState
from apps.inventory.demo import ClusterShape, load_cluster
from apps.inventory.models import Gpu, Nic, Node, Rack, Tag
from tests import factories

pytestmark = pytest.mark.django_db


def hostnames(response) -> list[str]:
    assert response.status_code == 200, response.data
    return [row["hostname"] for row in response.data["results"]]


def test_the_list_shows_counts_and_references(api_as, viewer, demo_cluster):
    response = api_as(viewer).get("/api/nodes/", {"limit": 100})
    assert response.data["count"] == 35
    row = next(row for row in response.data["results"] if row["hostname"] == "gpu009")
    rack = Rack.objects.get(name="r02")
    assert row["gpu_count"] == 8 and row["nic_count"] == 9
    assert row["rack"] == {
        "id": rack.public_id,
        "url": f"http://testserver/api/racks/{rack.public_id}/",
        "display": "r02",
    }
    assert row["site"]["display"] == "Demo DC"
    assert row["gpu_sku"]["display"] == "H200 SXM"
    assert [tag["display"] for tag in row["tags"]] == ["training"]
    assert row["status"] == NodeStatus.READY


def test_the_list_is_ordered_by_hostname_and_pages_are_stable(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    pages = [hostnames(client.get("/api/nodes/", {"limit": 10, "offset": offset})) for offset in (0, 10, 20, 30)]
    everything = [name for page in pages for name in page]
    assert everything == sorted(Node.objects.values_list("hostname", flat=True))
    by_status = [hostnames(client.get("/api/nodes/", {"ordering": "status", "limit": 5, "offset": o})) for o in (0, 5)]
    assert not set(by_status[0]) & set(by_status[1])


def test_the_list_costs_the_same_queries_for_10_or_35_nodes(api_as, viewer, django_assert_num_queries):
    client = api_as(viewer)
    load_cluster(ClusterShape(compute_nodes=10, nodes_per_rack=8, management_nodes=0))
    with django_assert_num_queries(5) as small:  # token, count, page, the page's GPU and NIC counts, tags
        assert len(hostnames(client.get("/api/nodes/", {"limit": 100}))) == 10
    load_cluster(ClusterShape(compute_nodes=35, nodes_per_rack=8, management_nodes=0))
    with django_assert_num_queries(5) as large:
        assert len(hostnames(client.get("/api/nodes/", {"limit": 100}))) == 35
    assert len(small.captured_queries) == len(large.captured_queries)


def test_the_list_of_the_demo_cluster_stays_within_pinned_queries(
    api_as, viewer, demo_cluster, django_assert_max_num_queries
):
    client = api_as(viewer)
    with django_assert_max_num_queries(5):
        response = client.get("/api/nodes/", {"limit": 100})
    assert len(response.data["results"]) == 35


def test_the_detail_shows_gpus_nics_links_firmware_and_volumes(
    api_as, viewer, demo_cluster, django_assert_max_num_queries
):
    node, client = Node.objects.get(hostname="gpu017"), api_as(viewer)
    with django_assert_max_num_queries(7):  # token, node and counts, tags, gpus, nics and cables, firmware, volumes
        response = client.get(f"/api/nodes/{node.public_id}/")
    assert response.status_code == 200
    data = response.data
    assert [gpu["index"] for gpu in data["gpus"]] == list(range(8))
    assert data["gpus"][0]["sku"]["display"] == "H200 SXM"
    assert len(data["nics"]) == 9
    links = {link["nic"]: link for link in data["links"]}
    assert links["ens1np0"]["peer"].startswith("leaf-r03-a:swp")
    assert links["ens2np0"]["plane"] == "B" and links["ens2np0"]["cable_speed_gbps"] == 400
    assert links["eno1"]["peer"] == "mgmt-sw01:swp17"
    bios = next(fw for fw in data["firmware"] if fw["component"] == "bios")
    assert bios["version"] == "2.3.5"  # the node left one BIOS behind
    assert {volume["mount_point"] for volume in data["volumes"]} == {"/scratch", "/shared", "/checkpoints"}


def test_the_detail_names_the_far_end_of_a_node_to_node_cable(api_as, viewer):
    a, b = factories.make_nic(), factories.make_nic()
    from tests.inventory.factories import make_cable

    make_cable(a_nic=a, b_nic=b)
    response = api_as(viewer).get(f"/api/nodes/{b.node.public_id}/")
    assert response.data["links"][0]["peer"] == str(a)


# Filters


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "racked"}, [f"gpu{n:03d}" for n in range(25, 33)]),
        ({"status": ["racked", "ready"], "q": "gpu02"}, [f"gpu{n:03d}" for n in range(20, 30)]),
        ({"rack": "r02"}, [f"gpu{n:03d}" for n in range(9, 17)]),
        ({"tag": "inference"}, [f"gpu{n:03d}" for n in range(25, 33)]),
        ({"q": "gpu017"}, ["gpu017"]),
        ({"q": "10.10.0.17"}, ["gpu017"]),  # management address
        ({"q": "10.21.0.2"}, ["mgmt02"]),  # BMC
        ({"role": "management"}, ["mgmt01", "mgmt02", "mgmt03"]),
        ({"site": "demo-dc", "rack": "net01"}, ["mgmt01", "mgmt02", "mgmt03"]),
        ({"gpu_sku": "H200 SXM", "rack": "r04", "q": "gpu03"}, ["gpu030", "gpu031", "gpu032"]),
    ],
)
def test_filters(api_as, viewer, demo_cluster, params, expected):
    assert hostnames(api_as(viewer).get("/api/nodes/", {**params, "limit": 100})) == expected


def test_filters_take_public_ids_too(api_as, viewer, demo_cluster):
    rack, tag = Rack.objects.get(name="r01"), Tag.objects.get(slug="inference")
    client = api_as(viewer)
    assert len(hostnames(client.get("/api/nodes/", {"rack": str(rack.public_id)}))) == 8
    assert len(hostnames(client.get("/api/nodes/", {"tag": str(tag.public_id), "limit": 100}))) == 8


def test_filter_on_unhealthy_gpus(api_as, viewer, demo_cluster, django_assert_max_num_queries):
    Gpu.objects.filter(node__hostname="gpu005", index=3).update(health=GpuHealth.FAILED)
    Gpu.objects.filter(node__hostname="gpu011").update(health=GpuHealth.WARNING)
    client = api_as(viewer)
    with django_assert_max_num_queries(5):
        response = client.get("/api/nodes/", {"has_unhealthy_gpu": "true"})
    assert hostnames(response) == ["gpu005", "gpu011"]
    assert all(row["gpu_count"] == 8 for row in response.data["results"])  # the subquery does not multiply rows
    healthy = client.get("/api/nodes/", {"has_unhealthy_gpu": "false", "limit": 100})
    assert "gpu005" not in hostnames(healthy) and len(hostnames(healthy)) == 33


def test_the_power_its_bmc_reads_is_shown_read_only_and_filters_the_list(api_as, viewer, admin, demo_cluster):
    since = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)  # a stamp the BMC poll would write, read back as stored
    Node.objects.filter(hostname__in=["gpu003", "gpu007"]).update(power_state=PowerState.OFF, power_state_since=since)
    Node.objects.filter(hostname="gpu004").update(power_state=PowerState.ON, power_state_since=since)
    client = api_as(viewer)

    off = client.get("/api/nodes/", {"power_state": "off"})
    assert hostnames(off) == ["gpu003", "gpu007"]
    assert off.data["results"][0]["power_state"] == "off"
    assert off.data["results"][0]["power_state_since"] == since.isoformat().replace("+00:00", "Z")
    never_read = client.get(f"/api/nodes/{Node.objects.get(hostname='gpu001').public_id}/").data
    assert (never_read["power_state"], never_read["power_state_since"]) == ("", None)
    assert client.get("/api/nodes/", {"power_state": "dim"}).status_code == 400

    node = Node.objects.get(hostname="gpu003")
    changed = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"power_state": "on"}, format="json")
    assert changed.status_code == 200 and changed.data["power_state"] == "off"  # the BMC's reading: not edited


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "melted"}, "status"),
        ({"role": "toaster"}, "role"),
        ({"rack": "r99"}, "rack"),
        ({"site": "nowhere"}, "site"),
        ({"tag": "no-such-tag"}, "tag"),
        ({"gpu_sku": "B9000"}, "gpu_sku"),
        ({"has_unhealthy_gpu": "maybe"}, "has_unhealthy_gpu"),
    ],
)
def test_a_bad_filter_value_is_400_naming_the_filter(api_as, viewer, demo_cluster, params, field):
    response = api_as(viewer).get("/api/nodes/", params)
    assert response.status_code == 400
    assert list(response.data) == [field]


# Changes


def test_admins_create_update_and_delete_nodes(api_as, admin, demo_cluster):
    client = api_as(admin)
    rack = Rack.objects.get(name="r04")
    payload = {
        "hostname": "gpu033",
        "rack": str(rack.public_id),
        "u_position": 40,
        "u_height": 4,
        "gpu_sku": "H200 SXM",
        "expected_gpu_count": 8,
        "tags": ["training"],
        "management_ip": "10.10.0.33",
    }
    created = client.post("/api/nodes/", payload, format="json")
    assert created.status_code == 201, created.data
    assert created.data["gpu_count"] == 0 and created.data["status"] == NodeStatus.PLANNED
    node = Node.objects.get(hostname="gpu033")
    assert (
        node.rack == rack and node.u_position == 40 and list(node.tags.values_list("slug", flat=True)) == ["training"]
    )

    updated = client.patch(f"/api/nodes/{node.public_id}/", {"status": "racked", "tags": []}, format="json")
    assert updated.status_code == 200, updated.data
    assert updated.data["tags"] == []
    node.refresh_from_db()
    assert node.status == NodeStatus.RACKED and not node.tags.exists()

    assert client.delete(f"/api/nodes/{node.public_id}/").status_code == 204
    assert not Node.objects.filter(hostname="gpu033").exists()


def test_a_patch_returns_the_counts_of_the_node(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    response = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"comments": "fan noisy"}, format="json")
    assert response.status_code == 200
    assert response.data["gpu_count"] == 8 and response.data["comments"] == "fan noisy"


def test_deleting_a_node_takes_its_parts_with_it(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    assert api_as(admin).delete(f"/api/nodes/{node.public_id}/").status_code == 204
    assert not Gpu.objects.filter(node_id=node.pk).exists() and not Nic.objects.filter(node_id=node.pk).exists()


def rack_payload(**fields) -> dict:
    rack = Rack.objects.get(name="r01")
    return {"hostname": "intruder", "rack": str(rack.public_id), "u_height": 4, **fields}


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        (rack_payload, {"u_position": 3}, "overlaps gpu001"),  # the same U as gpu001
        (rack_payload, {"u_position": 5}, "overlaps gpu001"),  # U5-U8 overlaps gpu001's U3-U6
        (rack_payload, {"u_position": 46}, "does not fit"),  # U46-U49 in a 48U rack
        (dict, {"hostname": "x", "u_position": 3}, "needs a rack"),
        (dict, {"hostname": "x", "rack": "6f1f0d1e-0000-4000-8000-000000000000"}, "No rack matches"),
        (dict, {"hostname": "x", "rack": "r99"}, "No rack matches"),
        (dict, {"hostname": "-bad-"}, "valid host name"),
        (dict, {"hostname": "gpu001"}, "already exists"),
        (dict, {"hostname": "x", "management_ip": "10.10.0.999"}, "IPv4 address"),
        (dict, {"hostname": "x", "status": "melted"}, "not a valid choice"),
        (dict, {"hostname": "x", "gpu_sku": "B9000"}, "No GPU SKU matches"),
        (dict, {"hostname": "x", "tags": ["nope"]}, "No tag matches"),
        (dict, {"hostname": "x", "ssh_port": 70000}, "less than or equal to 65535"),
    ],
    ids=[
        "same-u",
        "overlapping-u",
        "past-the-top",
        "position-without-rack",
        "unknown-rack-id",
        "unknown-rack-name",
        "bad-hostname",
        "duplicate-hostname",
        "bad-ip",
        "bad-status",
        "unknown-sku",
        "unknown-tag",
        "bad-port",
    ],
)
def test_bad_input_is_400_naming_the_field_and_changes_nothing(api_as, admin, demo_cluster, payload, field, message):
    body = {**payload(), **field}
    named = (
        "hostname" if message in {"valid host name", "already exists"} else next(k for k in field if k != "hostname")
    )
    before = Node.objects.count()
    response = api_as(admin).post("/api/nodes/", body, format="json")
    assert response.status_code == 400
    assert list(response.data) == [named], response.data
    assert message in str(response.data[named][0])
    assert Node.objects.count() == before


def test_moving_a_node_onto_a_neighbour_is_refused(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu002")
    response = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"u_position": 4}, format="json")
    assert response.status_code == 400
    assert "overlaps gpu001" in response.data["u_position"][0]
    node.refresh_from_db()
    assert node.u_position == 7


def test_an_api_change_is_audited_as_the_token_user(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    response = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"status": "degraded"}, format="json")
    assert response.status_code == 200
    entry = AuditEntry.objects.for_object(node).get()
    assert entry.actor == admin and entry.actor_name == "admin"
    assert entry.source == ChangeSource.API and entry.action == AuditAction.UPDATE
    assert entry.changes == {"status": ["ready", "degraded"]}


def test_a_refused_change_writes_no_audit_entry(api_as, admin, viewer, demo_cluster):
    node = Node.objects.get(hostname="gpu003")
    api_as(viewer).patch(f"/api/nodes/{node.public_id}/", {"status": "degraded"}, format="json")
    api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"status": "melted"}, format="json")
    assert not AuditEntry.objects.for_object(node).exists()
