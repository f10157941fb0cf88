"""A bad id anywhere under /api/ is a JSON 404: every detail route and every action on one, with an id that is not
an id at all, a well-formed id of nothing, and a number (the integer primary key stays internal)."""

import re
import uuid

import pytest

from portal.urls import router

pytestmark = pytest.mark.django_db

GROUP = re.compile(r"\(\?P<(?P<name>\w+)>[^)]*\)")
BAD_IDS = ["nope", str(uuid.uuid4()), "12345"]


def _detail_routes():
    for pattern in router.urls:
        text = str(pattern.pattern)
        if "<format>" in text or not GROUP.search(text):
            continue
        yield pytest.param(text, id=text.strip("^$"))


ROUTES = list(_detail_routes())


def test_the_walk_finds_the_detail_routes_and_their_actions():
    assert len(ROUTES) >= 30
    assert any("events" in str(route.values[0]) for route in ROUTES)


@pytest.mark.parametrize("route", ROUTES)
def test_a_bad_id_is_a_json_404(route, api_as, admin):
    client = api_as(admin)
    for bad in BAD_IDS:
        url = "/api/" + GROUP.sub(bad, route).lstrip("^").rstrip("$")
        response = client.get(url)
        if response.status_code == 405:  # a POST-only action: the id is checked when it is used
            response = client.post(url, {}, format="json")
        assert response.status_code == 404, (url, response.status_code, response.content[:200])
        assert response["Content-Type"].startswith("application/json"), url
        assert "detail" in response.json()
