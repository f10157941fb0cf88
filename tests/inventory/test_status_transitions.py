"""A node's status moves along the table in apps.inventory.choices, on the edit page, over the API and in bulk."""

import pytest

from apps.inventory import services
from apps.inventory.choices import NodeStatus, allowed_next_statuses
from apps.inventory.models import Node

pytestmark = pytest.mark.django_db


def test_the_api_refuses_a_jump_naming_status_and_the_allowed_next_states(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    assert node.status == NodeStatus.READY
    response = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"status": "planned"}, format="json")

    assert response.status_code == 400
    assert "may become: degraded, failed, provisioning, retired" in response.data["status"][0]
    node.refresh_from_db()
    assert node.status == NodeStatus.READY


def test_the_api_takes_an_allowed_step_and_says_what_may_come_next(api_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    response = api_as(admin).patch(f"/api/nodes/{node.public_id}/", {"status": "degraded"}, format="json")
    assert response.status_code == 200 and response.data["status"] == "degraded"
    assert response.data["allowed_next_statuses"] == allowed_next_statuses("degraded")


def test_the_edit_form_shows_the_refusal_on_the_status_field(browser_as, admin, demo_cluster):
    node = Node.objects.get(hostname="gpu001")
    page = browser_as(admin).get(f"/nodes/{node.public_id}/edit/")
    data = {key: value for key, value in page.context["form"].initial.items() if value is not None}
    data.update(status="racked", tags=[tag.pk for tag in node.tags.all()])
    response = browser_as(admin).post(f"/nodes/{node.public_id}/edit/", data)

    assert response.status_code == 200
    assert "A ready node cannot become racked" in response.context["form"].errors["status"][0]
    node.refresh_from_db()
    assert node.status == NodeStatus.READY


def test_a_new_node_may_start_in_any_status(api_as, admin, db):
    response = api_as(admin).post("/api/nodes/", {"hostname": "new01", "status": "ready"}, format="json")
    assert response.status_code == 201, response.data


def test_a_bulk_edit_is_all_or_nothing_and_names_the_refused_hosts(demo_cluster):
    ready = Node.objects.get(hostname="gpu001")
    racked = Node.objects.filter(status=NodeStatus.RACKED).first()
    with pytest.raises(services.NodeChangeRefused) as refused:
        services.bulk_edit_nodes(nodes=[ready, racked], status=NodeStatus.DEGRADED)
    assert refused.value.errors["status"] == [
        f"{racked.hostname}: A racked node cannot become degraded; from racked it may become: "
        "provisioning, planned, retired."
    ]
    ready.refresh_from_db()
    assert ready.status == NodeStatus.READY  # the allowed half was rolled back too
