"""Cursor (keyset) pages beside limit/offset: `?cursor=` opts in, and a walk sees every row once even under inserts."""

import base64
from urllib.parse import parse_qs, urlparse

import pytest

from apps.core.pagination import encode_cursor
from apps.inventory.models import Gpu, Node
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
        "eyJvIjpbXX0",  # {"o":[]}: a cursor of the old, readable kind
        encode_cursor(["inventory.Node", "status", "pk"], ["ready", 1]),  # made for another ordering
        encode_cursor(["inventory.Gpu", "hostname", "pk"], ["n001", 1]),  # made for another list
        encode_cursor(["inventory.Node", "hostname", "pk"], ["n001"]),  # a value short
    ],
)
def test_a_bad_cursor_is_a_400_naming_it(api_as, viewer, cursor):
    factories.make_node(hostname="n001")
    response = api_as(viewer).get("/api/nodes/", {"cursor": cursor})
    assert response.status_code == 400 and "cursor" in response.json(), response.content


def _next_cursor(response) -> str:
    return parse_qs(urlparse(response.data["next"]).query)["cursor"][0]


def test_a_cursor_shows_no_column_path_primary_key_or_value_and_an_altered_one_is_refused(api_as, viewer):
    """docs/api.md: the integer key never leaves the server. A cursor read as base64 JSON showed the ordering's ORM
    paths (`node__hostname`) and the last row's primary key; now it is sealed, and a changed one is a 400."""
    node = factories.make_node(hostname="gpu-cursor-7")
    for index in range(3):
        factories.make_gpu(node=node, index=index)
    client = api_as(viewer)
    first = client.get("/api/gpus/", {"cursor": "", "limit": 1})
    cursor = _next_cursor(first)
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    last = Gpu.objects.get(public_id=first.data["results"][0]["id"])
    for secret in (b"node__hostname", b"gpu-cursor-7", b'"pk"', b'"v":[', f",{last.pk}]".encode()):
        assert secret not in raw, secret

    assert client.get("/api/gpus/", {"cursor": cursor, "limit": 1}).data["results"][0]["index"] == 1
    for position in (0, len(cursor) // 2, len(cursor) - 2):
        altered = cursor[:position] + ("A" if cursor[position] != "A" else "B") + cursor[position + 1 :]
        response = client.get("/api/gpus/", {"cursor": altered, "limit": 1})
        assert response.status_code == 400, (position, response.content)
        assert response.json()["cursor"][0].startswith("Invalid cursor")


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
