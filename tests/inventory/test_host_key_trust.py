"""Trusting a node's SSH host key is an admin's decision, on the node page as over the API (one rule for both)."""

import pytest

from apps.inventory.choices import HostKeyState
from apps.inventory.models import SshHostKey
from tests import factories
from tests.inventory.factories import make_host_key


@pytest.fixture
def node_with_keys(db):
    node = factories.make_node(hostname="hk1")
    old = make_host_key(node=node, state=HostKeyState.TRUSTED)
    pending = make_host_key(node=node)
    return node, old, pending


def _states(node):
    return dict(SshHostKey.objects.filter(node=node).values_list("public_id", "state"))


def _trust_url(node, key):
    return f"/nodes/{node.public_id}/host-keys/{key.public_id}/trust/"


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_below_admin_the_node_page_refuses_to_trust_and_shows_no_button(request, browser_as, node_with_keys, role):
    node, old, pending = node_with_keys
    before = _states(node)
    client = browser_as(request.getfixturevalue(role))
    page = client.get(f"/nodes/{node.public_id}/")
    assert page.status_code == 200
    assert _trust_url(node, pending) not in page.content.decode()
    assert b"Trust this key" not in page.content
    response = client.post(_trust_url(node, pending))
    assert response.status_code == 403
    assert _states(node) == before
    pending.refresh_from_db()
    assert pending.approved_by is None


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_below_admin_the_api_refuses_to_trust(request, api_as, node_with_keys, role):
    node, old, pending = node_with_keys
    before = _states(node)
    response = api_as(request.getfixturevalue(role)).patch(
        f"/api/host-keys/{pending.public_id}/", {"state": "trusted"}, format="json"
    )
    assert response.status_code == 403
    assert _states(node) == before


def test_an_admin_trusts_from_the_node_page(browser_as, admin, node_with_keys):
    node, old, pending = node_with_keys
    client = browser_as(admin)
    page = client.get(f"/nodes/{node.public_id}/")
    assert _trust_url(node, pending) in page.content.decode()
    response = client.post(_trust_url(node, pending))
    assert response.status_code == 302
    pending.refresh_from_db()
    old.refresh_from_db()
    assert pending.state == HostKeyState.TRUSTED and pending.approved_by == admin
    assert old.state == HostKeyState.REVOKED


def test_an_admin_trusts_over_the_api(api_as, admin, node_with_keys):
    node, old, pending = node_with_keys
    response = api_as(admin).patch(f"/api/host-keys/{pending.public_id}/", {"state": "trusted"}, format="json")
    assert response.status_code == 200, response.data
    pending.refresh_from_db()
    assert pending.state == HostKeyState.TRUSTED and pending.approved_by == admin
