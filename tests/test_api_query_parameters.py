"""Every list under /api/ refuses a query parameter it does not know, and a single-valued one given twice, with a
400 naming it; what it does know (filters, paging, search, ordering, format, cursor) still works."""

import pytest
from django.urls import reverse

from apps.core.filters import ALWAYS_KNOWN
from portal.urls import router

pytestmark = pytest.mark.django_db


def _lists():
    for prefix, viewset, basename in router.registry:
        if hasattr(viewset, "list") and hasattr(viewset, "get_queryset") and prefix != "topology":
            yield pytest.param(basename, id=prefix)


LISTS = list(_lists())


def test_the_walk_finds_every_list():
    assert len(LISTS) >= 23
    assert {"node", "job", "deployment", "simfault"} <= {param.values[0] for param in LISTS}


@pytest.mark.parametrize("basename", LISTS)
def test_an_unknown_or_repeated_parameter_is_400_naming_it_and_the_known_ones_work(basename, api_as, admin):
    client, url = api_as(admin), reverse(f"api:{basename}-list")
    response = client.get(url, {"no_such_filter": "x", "limit": "5"})
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == ["no_such_filter"]
    assert "Unknown query parameter" in body["no_such_filter"][0] and "limit" in body["no_such_filter"][0]

    repeated = client.get(url + "?limit=5&limit=500")
    assert repeated.status_code == 400
    assert repeated.json() == {"limit": ["Give this parameter once."]}

    # Paging, the format suffix and a cursor (for lists paged that way) are known to every list.
    assert client.get(url, {"limit": "2", "offset": "0", "format": "json"}).status_code == 200
    assert "cursor" in ALWAYS_KNOWN
    assert client.get(url, {"cursor": ""}).status_code == 200


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "ten"}, "A whole number is required."),
        ({"limit": "0"}, "Ensure this value is at least 1."),
        ({"limit": "1.5"}, "A whole number is required."),
        ({"offset": "-1"}, "Ensure this value is at least 0."),
        ({"offset": " 5"}, "A whole number is required."),
    ],
)
def test_a_page_size_or_offset_that_is_not_a_whole_number_is_refused(api_as, viewer, params, message):
    response = api_as(viewer).get("/api/nodes/", params)
    assert response.status_code == 400
    assert response.json() == {next(iter(params)): [message]}


def test_repeating_a_multi_valued_filter_is_fine(api_as, viewer, demo_cluster):
    response = api_as(viewer).get("/api/nodes/?status=racked&status=ready&limit=1")
    assert response.status_code == 200
    assert response.json()["count"] == 35


def test_search_and_ordering_are_known_where_the_list_has_them(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    assert client.get("/api/jobs/", {"search": "x", "ordering": "-created"}).status_code == 200
    assert client.get("/api/nodes/", {"ordering": "-hostname", "limit": "1"}).json()["results"][0]["hostname"]
    # Nodes search with their filter `q`; a `search` there is a parameter the list does not know.
    assert list(client.get("/api/nodes/", {"search": "gpu"}).json()) == ["search"]


@pytest.mark.parametrize(
    ("url", "params", "expected"),
    [
        ("/api/nodes/", {"hostname": "gpu025"}, ["gpu025"]),
        ("/api/racks/", {"name": "r04"}, ["r04"]),
        ("/api/switches/", {"name": "spine-a1"}, ["spine-a1"]),
        ("/api/gpu-skus/", {"name": "H200 SXM"}, ["H200 SXM"]),
        ("/api/nics/", {"node": "gpu001", "name": "ens1np0"}, ["gpu001:ens1np0"]),
    ],
)
def test_lists_filter_by_the_name_users_know_them_by(api_as, viewer, demo_cluster, url, params, expected):
    response = api_as(viewer).get(url, params)
    assert response.status_code == 200, response.content
    assert [row["display"] for row in response.json()["results"]] == expected


def test_a_thousand_unknown_parameters_get_a_small_answer_naming_the_first_and_the_count(api_as, viewer):
    query = "&".join(f"p{n:04d}=x" for n in range(1000))

    response = api_as(viewer).get(f"{reverse('api:node-list')}?{query}")

    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["p0000", "p0001", "p0002", "p0003", "p0004", "non_field_errors"]
    assert body["non_field_errors"] == ["1000 unknown query parameters; the first 5 are named."]
    assert len(response.content) < 4000
