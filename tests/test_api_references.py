"""References to other objects are written by public id or by the name users know them by, everywhere in the API;
a name several objects share needs the public id; and a request with several bad fields hears about all of them."""

import pytest

from apps.deployments.models import AcceptanceCriterion
from apps.inventory.models import GpuSku, Nic, Node, Rack, StorageTier
from apps.simulator.models import SimFault
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_node_is_created_in_a_rack_named_as_the_ui_and_the_import_name_it(api_as, admin, demo_cluster):
    response = api_as(admin).post("/api/nodes/", {"hostname": "gpu900", "rack": "r04"}, format="json")
    assert response.status_code == 201, response.data
    assert response.data["rack"]["display"] == "r04"
    assert Node.objects.get(hostname="gpu900").rack == Rack.objects.get(name="r04")


def test_a_rack_name_two_sites_share_needs_the_public_id(api_as, admin, demo_cluster):
    other = factories.make_rack(name="r04")
    client = api_as(admin)
    response = client.post("/api/nodes/", {"hostname": "gpu900", "rack": "r04"}, format="json")
    assert response.status_code == 400
    assert response.data == {"rack": ["2 racks are named 'r04'; give the public id."]}
    assert not Node.objects.filter(hostname="gpu900").exists()
    by_id = client.post("/api/nodes/", {"hostname": "gpu900", "rack": str(other.public_id)}, format="json")
    assert by_id.status_code == 201 and by_id.data["rack"]["id"] == other.public_id


def test_nics_and_gpus_are_named_inside_their_node(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")
    client = api_as(admin)
    response = client.patch(f"/api/nics/{nic.public_id}/", {"peer_gpus": ["gpu001:0", "gpu001:1"]}, format="json")
    assert response.status_code == 200, response.data
    assert [gpu["display"] for gpu in response.data["peer_gpus"]] == ["gpu001 GPU0", "gpu001 GPU1"]
    refused = client.patch(f"/api/nics/{nic.public_id}/", {"peer_gpus": ["gpu001:x", "gpu001"]}, format="json")
    assert refused.status_code == 400
    assert "No GPU matches 'gpu001:x'." in str(refused.data["peer_gpus"])


def test_a_volume_names_its_tier(api_as, admin, demo_cluster):
    tier = StorageTier.objects.order_by("name").first()
    node = factories.make_node()
    response = api_as(admin).post(
        "/api/volumes/",
        {"node": node.hostname, "tier": tier.name, "mount_point": "/scratch", "capacity_gb": 100},
        format="json",
    )
    assert response.status_code == 201, response.data
    assert response.data["tier"]["id"] == tier.public_id


def test_references_outside_the_inventory_take_names_and_public_ids(api_as, admin, operator, demo_cluster):
    node = Node.objects.get(hostname="gpu002")
    fault = api_as(operator).post("/api/sim/faults/", {"node": str(node.public_id), "kind": "mtu"}, format="json")
    assert fault.status_code == 201, fault.data
    assert fault.data["node"] == "gpu002" and SimFault.objects.filter(node=node).exists()
    missing = api_as(operator).post("/api/sim/faults/", {"node": "gpu999", "kind": "mtu"}, format="json")
    assert missing.status_code == 400 and missing.data == {"node": ["No node matches 'gpu999'."]}

    sku = GpuSku.objects.get(name="H200 SXM")
    criterion = AcceptanceCriterion.objects.filter(sku=None).first()
    body = {"sku": str(sku.public_id), "check": criterion.check_name, "comparator": criterion.comparator}
    created = api_as(admin).post("/api/acceptance-criteria/", {**body, "threshold": criterion.threshold}, format="json")
    assert created.status_code == 201, created.data
    assert created.data["sku"] == "H200 SXM"
    unknown = api_as(admin).post("/api/acceptance-criteria/", {**body, "sku": "B9000"}, format="json")
    assert unknown.status_code == 400 and unknown.data["sku"] == ["No GPU SKU matches 'B9000'."]


def test_every_bad_field_is_reported_at_once_and_nothing_changes(api_as, admin, demo_cluster):
    before = Node.objects.count()
    response = api_as(admin).post(
        "/api/nodes/",
        {"hostname": "gpu001", "rack": "r99", "gpu_sku": "B9000", "ssh_port": 0, "tags": ["nope"]},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.data) == {"hostname", "rack", "gpu_sku", "ssh_port", "tags"}, response.data
    assert "already exists" in str(response.data["hostname"])
    assert Node.objects.count() == before


def test_a_field_error_and_a_constraint_of_the_fields_that_passed_are_both_reported(api_as, admin, demo_cluster):
    nic = Nic.objects.get(node__hostname="gpu001", name="ens1np0")
    response = api_as(admin).post(
        "/api/nics/", {"node": "gpu001", "name": nic.name, "speed_gbps": "fast", "mtu": 9000}, format="json"
    )
    assert response.status_code == 400
    assert "speed_gbps" in response.data and len(response.data) >= 2, response.data
