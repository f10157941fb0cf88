"""Cursor (keyset) pages beside limit/offset: `?cursor=` opts in, and a walk sees every row once even under inserts."""

from urllib.parse import parse_qs, urlparse

import pytest

from apps.core.pagination import encode_cursor
from apps.inventory.models import Node
from tests import factories

pytestmark = pytest.mark.django_db


def walk(client, path: str, params: dict, between=None) -> list[dict]:
    """Every row of a list by following `next`; `between(page_number)` runs after each page."""
    rows, params, pages = [], {**params, "cursor": ""}, 0
    while True:
        response = client.get(path, params)
        assert response.status_code == 200, response.data
        assert "count" not in response.data and "previous" not in response.data
        rows += response.data["results"]
        pages += 1
        if between:
            between(pages)
        if response.data["next"] is None:
            return rows
        query = parse_qs(urlparse(response.data["next"]).query)
        assert "offset" not in query
        params = {name: values[0] for name, values in query.items()}


def test_a_cursor_walk_sees_every_node_once_in_order_while_nodes_are_added(api_as, viewer):
    for number in range(0, 60, 2):
        factories.make_node(hostname=f"n{number:03d}")
    before = set(Node.objects.values_list("hostname", flat=True))

    def insert(page: int) -> None:
        # One node before the walk's position (it must not push a seen row into the next page) and one far after.
        factories.make_node(hostname=f"n{(page - 1) * 14:03d}b")
        factories.make_node(hostname=f"n{200 + page:03d}")

    rows = walk(api_as(viewer), "/api/nodes/", {"limit": 7}, between=insert)
    names = [row["hostname"] for row in rows]
    assert len(names) == len(set(names)), "a row came twice"
    assert before <= set(names), f"missed {sorted(before - set(names))}"
    assert names == sorted(names)


def test_offset_pages_are_unchanged_without_a_cursor(api_as, viewer):
    for number in range(12):
        factories.make_node(hostname=f"n{number:03d}")
    response = api_as(viewer).get("/api/nodes/", {"limit": 5, "offset": 5})
    assert response.data["count"] == 12
    assert [row["hostname"] for row in response.data["results"]] == [f"n{n:03d}" for n in range(5, 10)]
    assert "offset=10" in response.data["next"] and "cursor" not in response.data["next"]


@pytest.mark.wirings  # where NULLs sort is the database's
def test_a_cursor_follows_the_asked_ordering_with_ties_and_nulls(api_as, viewer):
    # u_position is nullable and repeats (one per rack): the primary key breaks ties, NULLs have one place.
    for number in range(15):
        position = None if number % 4 == 0 else number % 3 + 1
        factories.make_node(hostname=f"n{number:03d}", rack=factories.make_rack(), u_position=position)
    for ordering in ("u_position", "-u_position", "-hostname"):
        rows = walk(api_as(viewer), "/api/nodes/", {"limit": 4, "ordering": ordering})
        names = [row["hostname"] for row in rows]
        assert sorted(names) == [f"n{n:03d}" for n in range(15)], ordering
        offset = api_as(viewer).get("/api/nodes/", {"limit": 100, "ordering": ordering})
        assert names == [row["hostname"] for row in offset.data["results"]], ordering


def test_jobs_and_gpus_page_by_cursor_too(api_as, viewer):
    node = factories.make_node()
    for index in range(5):
        factories.make_gpu(node=node, index=index)
    rows = walk(api_as(viewer), "/api/gpus/", {"limit": 2})
    assert [row["index"] for row in rows] == [0, 1, 2, 3, 4]
    assert api_as(viewer).get("/api/jobs/", {"cursor": ""}).data == {"next": None, "results": []}


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 !",
        "eyJvIjpbXX0",  # {"o":[]}: no values
        encode_cursor(["status", "pk"], ["ready", 1]),  # made for another ordering
        encode_cursor(["hostname", "pk"], ["n001", "not a number"]),
        encode_cursor(["hostname", "pk"], [{"a": 1}, 1]),
    ],
)
def test_a_bad_cursor_is_a_400_naming_it(api_as, viewer, cursor):
    factories.make_node(hostname="n001")
    response = api_as(viewer).get("/api/nodes/", {"cursor": cursor})
    assert response.status_code == 400 and "cursor" in response.json(), response.content


def test_a_cursor_page_still_refuses_an_offset_past_the_bound(api_as, viewer):
    # The cursor page ignores the offset, but a value the schema refuses is refused there too.
    response = api_as(viewer).get("/api/nodes/", {"cursor": "", "offset": str(2**63)})
    assert response.status_code == 400 and "offset" in response.json(), response.content


@pytest.mark.parametrize("ordering", ["site", "-site"])
def test_a_cursor_walk_ordered_by_a_relation_follows_its_ordering(api_as, viewer, ordering):
    """`?ordering=site` orders by the site's own ordering (its name): the cursor holds that name, not the Site (once a
    500, "Object of type Site is not JSON serializable")."""
    for name in ("b-site", "a-site", "c-site"):
        site = factories.make_site(name=name)
        for rack in range(3):
            factories.make_rack(site=site, name=f"{name}-r{rack}")

    rows = walk(api_as(viewer), "/api/racks/", {"limit": 2, "ordering": ordering})
    offset_rows = api_as(viewer).get("/api/racks/", {"limit": 100, "ordering": ordering}).data["results"]

    assert [row["name"] for row in rows] == [row["name"] for row in offset_rows]
    sites = [row["name"].rsplit("-r", 1)[0] for row in rows]
    assert sites == sorted(sites, reverse=ordering.startswith("-")) and len(rows) == 9
