"""Sites, racks, tags, GPU SKUs, storage, firmware and host keys over the API."""

import pytest

from apps.core.choices import AuditAction, ChangeSource
from apps.core.models import AuditEntry
from apps.inventory.choices import HostKeyState
from apps.inventory.hostkeys import fingerprint_of
from apps.inventory.models import (
    Firmware,
    GpuSku,
    Node,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Tag,
    Volume,
)
from tests import factories
from tests.inventory.factories import ed25519_key, make_host_key

pytestmark = pytest.mark.django_db


def site_id() -> str:
    return str(Site.objects.get(slug="demo-dc").public_id)


def node_id(hostname: str = "gpu001") -> str:
    return str(Node.objects.get(hostname=hostname).public_id)


# prefix, model, a valid new object, a change to it (field, value)
CREATIONS = [
    ("sites", Site, lambda: {"name": "Hall 2", "slug": "hall-2"}, ("description", "overflow hall")),
    (
        "racks",
        Rack,
        lambda: {"site": "demo-dc", "name": "r99", "row": "C", "u_height": 42, "power_budget_kw": 40.0},
        ("power_budget_kw", 60.0),
    ),
    ("tags", Tag, lambda: {"name": "Burn-in", "slug": "burn-in"}, ("colour", "#ff0000")),
    (
        "gpu-skus",
        GpuSku,
        lambda: {
            "name": "B100 SXM",
            "architecture": "Blackwell",
            "hbm_gib": 180,
            "mem_bandwidth_tb_per_s": 8.0,
            "mem_bandwidth_reference_tb_per_s": 7.04,
            "tdp_w": 700,
            "bf16_dense_tflops": 1750.0,
        },
        ("tdp_w", 1200),
    ),
    (
        "storage-tiers",
        StorageTier,
        lambda: {
            "site": site_id(),
            "name": "Scratch SSD",
            "kind": "warm",
            "medium": "NVMe-oF",
            "bandwidth_gb_per_s": 12.0,
            "capacity_tb": 50.0,
        },
        ("required_bandwidth_gb_per_s", 10.0),
    ),
    (
        "volumes",
        Volume,
        lambda: {
            "node": "gpu001",
            "tier": str(StorageTier.objects.get(kind="hot").public_id),
            "mount_point": "/data/extra",
            "capacity_gb": 500,
        },
        ("capacity_gb", 1000),
    ),
    (
        "firmware",
        Firmware,
        lambda: {"node": node_id("mgmt01"), "component": "nic_firmware", "target": "ens1np0", "version": "28.41.1000"},
        ("version", "28.42.1000"),
    ),
    ("host-keys", SshHostKey, lambda: {"node": "gpu001", "public_key": ed25519_key(7)}, ("state", "revoked")),
]


@pytest.mark.parametrize(("prefix", "model", "payload", "change"), CREATIONS, ids=[c[0] for c in CREATIONS])
def test_admins_create_update_and_delete(api_as, admin, demo_cluster, prefix, model, payload, change):
    client = api_as(admin)
    created = client.post(f"/api/{prefix}/", payload(), format="json")
    assert created.status_code == 201, created.data
    obj = model.objects.get(public_id=created.data["id"])

    field, value = change
    updated = client.patch(f"/api/{prefix}/{obj.public_id}/", {field: value}, format="json")
    assert updated.status_code == 200, updated.data
    assert updated.data[field] == value
    obj.refresh_from_db()
    assert str(getattr(obj, field)) == str(value)

    assert client.delete(f"/api/{prefix}/{obj.public_id}/").status_code == 204
    assert not model.objects.filter(pk=obj.pk).exists()
    # Every inventory object's changes are audited (a GPU SKU decides which power limits are accepted).
    actions = list(AuditEntry.objects.for_object(obj).order_by("id").values_list("action", "actor_name"))
    assert actions == [("create", "admin"), ("update", "admin"), ("delete", "admin")]


def test_a_rack_made_over_the_api_is_audited_as_the_token_user(api_as, admin, demo_cluster):
    payload = {"site": "demo-dc", "name": "r99", "power_budget_kw": "40.0"}
    response = api_as(admin).post("/api/racks/", payload, format="json")
    rack = Rack.objects.get(public_id=response.data["id"])
    entry = AuditEntry.objects.for_object(rack).get()
    assert (entry.actor_name, entry.source, entry.action) == ("admin", ChangeSource.API, AuditAction.CREATE)
    assert entry.changes["name"] == [None, "r99"]


@pytest.mark.parametrize(
    ("prefix", "payload", "field"),
    [
        ("sites", {"name": "Hall 2", "slug": "Hall 2"}, "slug"),
        ("sites", {"name": "Demo DC", "slug": "demo-2"}, "name"),
        ("racks", {"site": "demo-dc", "name": "r01", "power_budget_kw": "40"}, "non_field_errors"),
        ("racks", {"site": "nowhere", "name": "r99", "power_budget_kw": "40"}, "site"),
        ("racks", {"site": "demo-dc", "name": "r99", "power_budget_kw": "0"}, "power_budget_kw"),
        ("racks", {"site": "demo-dc", "name": "r99", "power_budget_kw": "40", "u_height": 0}, "u_height"),
        ("tags", {"name": "Burn-in", "slug": "burn-in", "colour": "red"}, "colour"),
        ("gpu-skus", {"name": "H200 SXM"}, "name"),
        ("storage-tiers", {"site": "demo-dc", "name": "T", "kind": "lukewarm"}, "kind"),
        ("volumes", {"node": "gpu001", "mount_point": "/data/../etc", "capacity_gb": 1}, "mount_point"),
        ("volumes", {"node": "gpu001", "mount_point": "/scratch", "capacity_gb": 1}, "non_field_errors"),
        ("firmware", {"node": "gpu001", "component": "bios", "version": "2.5.0"}, "non_field_errors"),
        ("firmware", {"node": "gpu001", "component": "bios", "target": "x", "version": "2 5"}, "version"),
        ("firmware", {"node": "gpu001", "component": "cpld", "version": "1"}, "component"),
        ("host-keys", {"node": "gpu001", "public_key": "ssh-dss AAAAB3NzaC1kc3M="}, "public_key"),
        ("host-keys", {"node": "gpu001", "public_key": "ssh-ed25519 AAA"}, "public_key"),
    ],
)
def test_bad_input_is_400_naming_the_field(api_as, admin, demo_cluster, prefix, payload, field):
    if prefix == "storage-tiers":
        payload = {**payload, "medium": "x", "bandwidth_gb_per_s": "1.0", "capacity_tb": "1.0"}
    if prefix == "volumes":
        payload = {**payload, "tier": str(StorageTier.objects.get(kind="hot").public_id)}
    client = api_as(admin)  # its token is audited when made
    before = AuditEntry.objects.count()
    response = client.post(f"/api/{prefix}/", payload, format="json")
    assert response.status_code == 400
    assert field in response.data, response.data
    assert AuditEntry.objects.count() == before


def test_a_sku_reference_cannot_exceed_its_datasheet(api_as, admin, demo_cluster):
    sku = GpuSku.objects.get(name="H200 SXM")
    response = api_as(admin).patch(
        f"/api/gpu-skus/{sku.public_id}/", {"mem_bandwidth_reference_tb_per_s": "5.00"}, format="json"
    )
    assert response.status_code == 400
    assert "cannot exceed the datasheet" in str(response.data)
    sku.refresh_from_db()
    assert str(sku.mem_bandwidth_reference_tb_per_s) == "4.21"


@pytest.mark.parametrize(
    ("prefix", "lookup", "used_by"),
    [
        ("sites", lambda: Site.objects.get(slug="demo-dc"), "racks"),
        ("racks", lambda: Rack.objects.get(name="r01"), "8 nodes"),
        ("gpu-skus", lambda: GpuSku.objects.get(name="H200 SXM"), "256 GPUs"),
        ("storage-tiers", lambda: StorageTier.objects.get(kind="hot"), "32 volumes"),
    ],
)
def test_deleting_something_still_in_use_is_a_conflict(api_as, admin, demo_cluster, prefix, lookup, used_by):
    obj = lookup()
    response = api_as(admin).delete(f"/api/{prefix}/{obj.public_id}/")
    assert response.status_code == 409
    assert used_by in response.data["detail"]
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_a_host_key_is_normalised_and_fingerprinted(api_as, admin, demo_cluster):
    key = ed25519_key(3)
    response = api_as(admin).post(
        "/api/host-keys/", {"node": "gpu002", "public_key": f"  {key}  root@gpu002\n"}, format="json"
    )
    assert response.status_code == 201, response.data
    assert response.data["public_key"] == key
    assert response.data["fingerprint"] == fingerprint_of(key)
    assert response.data["key_type"] == "ssh-ed25519"
    assert response.data["state"] == HostKeyState.PENDING and response.data["approved_by"] is None
    duplicate = api_as(admin).post("/api/host-keys/", {"node": "gpu002", "public_key": key}, format="json")
    assert duplicate.status_code == 400


def test_trusting_a_host_key_records_who_did(api_as, admin, demo_cluster):
    key = make_host_key(node=Node.objects.get(hostname="gpu004"))
    response = api_as(admin).patch(f"/api/host-keys/{key.public_id}/", {"state": "trusted"}, format="json")
    assert response.status_code == 200, response.data
    assert response.data["approved_by"] == "admin"
    key.refresh_from_db()
    assert key.state == HostKeyState.TRUSTED and key.approved_by == admin


def test_firmware_filters(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    bios = client.get("/api/firmware/", {"component": "bios", "limit": 100}).data
    assert bios["count"] == 35
    behind = client.get("/api/firmware/", {"component": "bios", "version": "2.3.5"}).data
    assert [row["node"]["display"] for row in behind["results"]] == ["gpu017"]
    assert client.get("/api/firmware/", {"node": "gpu001"}).data["count"] == 18
    assert client.get("/api/firmware/", {"node": node_id("mgmt01")}).data["count"] == 2
    assert list(client.get("/api/firmware/", {"component": "cpld"}).data) == ["component"]


def test_other_lists_filter_by_their_references(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    assert client.get("/api/racks/", {"site": "demo-dc"}).data["count"] == 5
    assert client.get("/api/volumes/", {"node": "gpu001"}).data["count"] == 3
    assert client.get("/api/volumes/", {"tier": "Hot NVMe RAID"}).data["count"] == 32
    assert client.get("/api/storage-tiers/", {"kind": "cold"}).data["count"] == 1
    other = factories.make_site()
    assert client.get("/api/racks/", {"site": other.slug}).data["count"] == 0
    assert list(client.get("/api/racks/", {"site": "nowhere"}).data) == ["site"]


@pytest.mark.parametrize(
    ("prefix", "queries"),
    [
        ("sites", 3),
        ("racks", 4),  # and the page's BMC power readings (their measured draw)
        ("tags", 3),
        ("gpu-skus", 3),
        ("gpus", 3),
        ("switches", 3),
        ("pdus", 3),
        ("cables", 3),
        ("storage-tiers", 3),
        ("volumes", 3),
        ("firmware", 3),
        ("host-keys", 3),
    ],
)
def test_lists_cost_constant_queries(api_as, viewer, demo_cluster, django_assert_num_queries, prefix, queries):
    for hostname in ("gpu001", "gpu002", "gpu003"):
        make_host_key(node=Node.objects.get(hostname=hostname))
    client = api_as(viewer)
    with django_assert_num_queries(queries):  # token, count, page
        response = client.get(f"/api/{prefix}/", {"limit": 100})
    assert response.status_code == 200


def test_quantities_are_json_numbers_and_the_schema_says_number(api_as, admin, demo_cluster):
    """Decimals answered as strings (`"capacity_tb": "200.0"`) beside integers and floats that are numbers."""
    client = api_as(admin)
    tier = client.get("/api/storage-tiers/").json()["results"][0]
    rack = client.get("/api/racks/").json()["results"][0]
    sku = client.get("/api/gpu-skus/", {"name": "H200 SXM"}).json()["results"][0]
    quantities = [
        tier["capacity_tb"],
        tier["bandwidth_gb_per_s"],
        rack["power_budget_kw"],
        sku["mem_bandwidth_tb_per_s"],
    ]
    assert all(isinstance(value, int | float) and not isinstance(value, bool) for value in quantities), quantities
    assert sku["mem_bandwidth_reference_tb_per_s"] == 4.21
    # A storage tier's bandwidth is in GB/s, as its page shows: named so, not `bandwidth_gbps` (gigabits).
    assert "bandwidth_gbps" not in tier and tier["bandwidth_gb_per_s"] > 0
    # So are a SKU's: TB/s of memory bandwidth and GB/s of NVLink, under names that say bytes.
    assert not {"mem_bandwidth_tbps", "mem_bandwidth_reference_tbps", "nvlink_gbps"} & set(sku)
    assert sku["nvlink_gb_per_s"] == 900

    schema = client.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    assert schema["StorageTier"]["properties"]["capacity_tb"]["type"] == "number"
    assert schema["StorageTierRequest"]["properties"]["capacity_tb"]["minimum"] == 0.1
    as_text = [
        f"{component}.{name}"
        for component, body in schema.items()
        for name, field in body.get("properties", {}).items()
        if field.get("format") == "decimal"
    ]
    assert as_text == []
