"""Who may do what on every inventory endpoint: anonymous callers are asked to log in, viewers and operators read,
only admins change the inventory."""

import pytest

from apps.inventory.models import (
    Cable,
    Firmware,
    Gpu,
    GpuSku,
    Nic,
    Node,
    Pdu,
    Rack,
    Site,
    SshHostKey,
    StorageTier,
    Switch,
    Tag,
    Volume,
)
from tests.inventory.factories import make_host_key

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("sites", Site),
    ("racks", Rack),
    ("tags", Tag),
    ("gpu-skus", GpuSku),
    ("nodes", Node),
    ("gpus", Gpu),
    ("nics", Nic),
    ("switches", Switch),
    ("pdus", Pdu),
    ("cables", Cable),
    ("storage-tiers", StorageTier),
    ("volumes", Volume),
    ("firmware", Firmware),
    ("host-keys", SshHostKey),
]
IDS = [prefix for prefix, _ in ENDPOINTS]


@pytest.fixture
def inventory(demo_cluster):
    make_host_key(node=Node.objects.get(hostname="gpu001"))
    return demo_cluster


def first(model):
    return model.objects.order_by("pk").first()


@pytest.mark.parametrize(("prefix", "model"), ENDPOINTS, ids=IDS)
def test_anonymous_callers_get_401(api_client, inventory, prefix, model):
    obj = first(model)
    assert api_client.get(f"/api/{prefix}/").status_code == 401
    assert api_client.get(f"/api/{prefix}/{obj.public_id}/").status_code == 401
    assert api_client.post(f"/api/{prefix}/", {}, format="json").status_code == 401
    assert api_client.delete(f"/api/{prefix}/{obj.public_id}/").status_code == 401
    assert model.objects.filter(pk=obj.pk).exists()


@pytest.mark.parametrize(("prefix", "model"), ENDPOINTS, ids=IDS)
def test_viewers_read_lists_and_details(api_as, viewer, inventory, prefix, model):
    client = api_as(viewer)
    listing = client.get(f"/api/{prefix}/")
    assert listing.status_code == 200
    assert listing.data["count"] == model.objects.count()
    obj = first(model)
    detail = client.get(f"/api/{prefix}/{obj.public_id}/")
    assert detail.status_code == 200
    assert detail.data["id"] == str(obj.public_id)
    assert detail.data["url"] == f"http://testserver/api/{prefix}/{obj.public_id}/"
    assert detail.data["display"] == str(obj)


@pytest.mark.parametrize("role", ["viewer", "operator"])
@pytest.mark.parametrize(("prefix", "model"), ENDPOINTS, ids=IDS)
def test_only_admins_change_the_inventory(request, api_as, inventory, role, prefix, model):
    client = api_as(request.getfixturevalue(role))
    obj = first(model)
    before = model.objects.count()
    assert client.post(f"/api/{prefix}/", {}, format="json").status_code == 403
    assert client.patch(f"/api/{prefix}/{obj.public_id}/", {}, format="json").status_code == 403
    assert client.put(f"/api/{prefix}/{obj.public_id}/", {}, format="json").status_code == 403
    assert client.delete(f"/api/{prefix}/{obj.public_id}/").status_code == 403
    assert model.objects.count() == before


@pytest.mark.parametrize("prefix", IDS)
def test_an_unknown_or_malformed_id_is_404(api_as, viewer, inventory, prefix):
    client = api_as(viewer)
    assert client.get(f"/api/{prefix}/00000000-0000-4000-8000-000000000000/").status_code == 404
    assert client.get(f"/api/{prefix}/1/").status_code == 404


def test_the_browser_session_works_for_the_api_too(browser_as, viewer, inventory):
    response = browser_as(viewer).get("/api/nodes/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert response.json()["count"] == Node.objects.count()


@pytest.mark.parametrize(("prefix", "model"), ENDPOINTS, ids=IDS)
def test_admins_browse_the_api_with_its_forms(api_as, admin, inventory, prefix, model):
    client = api_as(admin)
    obj = first(model)
    for url in (f"/api/{prefix}/", f"/api/{prefix}/{obj.public_id}/"):
        response = client.get(url, HTTP_ACCEPT="text/html")
        assert response.status_code == 200
        assert b"<form" in response.content


def test_the_ui_keeps_its_own_page_names():
    from django.urls import reverse

    some_id = "6f1f0d1e-0000-4000-8000-000000000000"
    assert reverse("node-list") == "/nodes/"
    assert reverse("rack-list") == "/racks/"
    assert reverse("node-detail", args=[some_id]) == f"/nodes/{some_id}/"
    assert reverse("rack-detail", args=[some_id]) == f"/racks/{some_id}/"
