"""API lists order by the columns their pages sort by (`?ordering=`, apps/core/filters.ListOrderingFilter): a field a
list does not order by is a 400 naming `ordering` (DRF alone would drop it and answer in another order), and the
schema lists the fields each list takes."""

import uuid
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db.models import JSONField

from apps.benchmarks.filters import BENCHMARK_RUN_COLUMNS
from apps.core.listing import sort_fields
from apps.deployments.filters import DEPLOYMENT_COLUMNS
from apps.diagnosis.filters import INCIDENT_COLUMNS
from apps.inventory.models import Tag
from apps.jobs.filters import JOB_COLUMNS
from apps.jobs.models import Job
from portal.urls import router
from tests.core.test_listing import _deployments, _incidents, _runs

# Ordering (text collation, where NULLs go) is the database's (wirings).
pytestmark = [pytest.mark.django_db, pytest.mark.wirings]

LISTS = {
    "/api/jobs/": (
        JOB_COLUMNS,
        lambda: [Job.objects.create(kind="k", transport="sim", node_count=n) for n in (3, 1, 2)],
    ),
    "/api/deployments/": (DEPLOYMENT_COLUMNS, _deployments),
    "/api/incidents/": (INCIDENT_COLUMNS, _incidents),
    "/api/benchmarks/": (BENCHMARK_RUN_COLUMNS, _runs),
}


@pytest.mark.parametrize("path", LISTS)
def test_each_page_column_orders_the_api_list_and_others_are_refused(api_as, viewer, path):
    columns, seed = LISTS[path]
    seed()
    client = api_as(viewer)
    for field in sort_fields(columns):
        for ordering in (field, f"-{field}"):
            response = client.get(path, {"ordering": ordering})
            assert response.status_code == 200, (ordering, response.json())
    refused = client.get(path, {"ordering": "created,password"})
    assert refused.status_code == 400
    message = refused.json()["ordering"][0]
    assert "'password'" in message and "created" in message


def test_ordering_follows_the_field_both_ways_with_ties_broken_by_the_primary_key(api_as, viewer):
    jobs = [Job.objects.create(kind="k", transport="sim", node_count=n) for n in (3, 1, 3, 2)]
    client = api_as(viewer)
    up = [row["id"] for row in client.get("/api/jobs/", {"ordering": "node_count"}).json()["results"]]
    down = [row["id"] for row in client.get("/api/jobs/", {"ordering": "-node_count"}).json()["results"]]
    by_id = {str(job.public_id): job for job in jobs}
    assert [by_id[i].node_count for i in up] == [1, 2, 3, 3]
    assert [by_id[i].node_count for i in down] == [3, 3, 2, 1]
    assert by_id[up[2]].pk < by_id[up[3]].pk  # the tie, in primary key order


def test_ordering_by_id_is_by_the_id_the_api_shows_never_the_internal_key(api_as, viewer, admin):
    """`?ordering=id` ordered by the integer primary key, which the API never shows, while each row's `id` is its
    public id: ids made in descending order, the rows must come back in the order of the ids a client reads."""
    for number in range(4, 0, -1):  # the primary keys ascend as the public ids descend
        Tag.objects.create(name=f"t{number}", slug=f"t{number}", public_id=uuid.UUID(int=number))
    client = api_as(viewer)
    up = [row["id"] for row in client.get("/api/tags/", {"ordering": "id"}).json()["results"]]
    down = [row["id"] for row in client.get("/api/tags/", {"ordering": "-id"}).json()["results"]]
    assert up == sorted(up) and down == sorted(up, reverse=True) and len(up) == 4, up
    refused = client.get("/api/tags/", {"ordering": "public_id"})  # no name the API shows
    assert refused.status_code == 400 and "'public_id'" in refused.json()["ordering"][0]

    schema = api_as(admin).get("/api/schema/", {"format": "json"}).json()
    parameters = schema["paths"]["/api/tags/"]["get"]["parameters"]
    enum = next(p for p in parameters if p["name"] == "ordering")["schema"]["items"]["enum"]
    assert enum.count("id") == 1 and "-id" in enum and "public_id" not in enum and "-public_id" not in enum


def test_node_ordering_is_strict_too(api_as, viewer, demo_cluster):
    client = api_as(viewer)
    assert client.get("/api/nodes/", {"ordering": "-u_position,hostname"}).status_code == 200
    assert client.get("/api/nodes/", {"ordering": "hostnme"}).status_code == 400
    assert client.get("/api/nodes/", {"ordering": "hostname,"}).status_code == 400


def test_the_schema_lists_each_lists_ordering_fields(api_as, admin):
    schema = api_as(admin).get("/api/schema/", {"format": "json"}).json()

    def ordering(path):
        parameters = schema["paths"][path]["get"]["parameters"]
        return next(p for p in parameters if p["name"] == "ordering")

    jobs = ordering("/api/jobs/")
    assert jobs["schema"]["type"] == "array" and jobs["explode"] is False
    assert set(jobs["schema"]["items"]["enum"]) == {
        *sort_fields(JOB_COLUMNS),
        *(f"-{field}" for field in sort_fields(JOB_COLUMNS)),
    }
    racks = ordering("/api/racks/")["schema"]["items"]["enum"]
    assert "full_load_w" in racks and "-power_budget_kw" in racks


@pytest.mark.parametrize(
    "path", ["/api/remediation-policies/", "/api/slos/", "/api/acceptance-criteria/", "/api/compute-domains/"]
)
def test_a_list_without_declared_ordering_fields_refuses_an_unknown_one_too(api_as, viewer, path):
    """These lists order by their serializer's fields (DRF's default) and dropped anything else silently."""
    client = api_as(viewer)
    refused = client.get(path, {"ordering": "__bogus"})
    assert refused.status_code == 400 and "'__bogus'" in refused.json()["ordering"][0]
    known = "-check_name" if path == "/api/acceptance-criteria/" else "-name"
    assert client.get(path, {"ordering": known}).status_code == 200


def test_every_list_in_the_schema_states_the_fields_it_orders_by(api_as, admin):
    schema = api_as(admin).get("/api/schema/", {"format": "json"}).json()
    free = [
        path
        for path, operations in schema["paths"].items()
        for parameter in operations.get("get", {}).get("parameters", [])
        if parameter["name"] == "ordering" and "enum" not in parameter["schema"].get("items", {})
    ]
    assert free == []


def _cursor_lists(schema) -> dict[str, list[str]]:
    """Each list that pages by cursor: the fields it offers to order by."""
    lists = {}
    for path, operations in schema["paths"].items():
        parameters = {p["name"]: p for p in operations.get("get", {}).get("parameters", [])}
        if "ordering" in parameters and "cursor" in parameters:
            lists[path] = [f for f in parameters["ordering"]["schema"]["items"]["enum"] if not f.startswith("-")]
    return lists


def test_a_cursor_walk_follows_its_next_links_in_every_order_a_list_offers(api_as, admin, demo_cluster):
    """`?ordering=pfc_priorities&cursor=` answered its own `next` link with "Invalid cursor": a JSON list is not one
    value a keyset page can resume after. Every field each list offers, over the lists the demo fills."""
    client = api_as(admin)
    lists = _cursor_lists(client.get("/api/schema/", {"format": "json"}).json())
    assert "/api/nics/" in lists and "pfc_priorities" not in lists["/api/nics/"]
    walked = 0
    for path, fields in lists.items():
        if "{" in path or client.get(path, {"limit": 1}).json()["count"] < 4:
            continue
        walked += 1
        for field in fields:
            params = {"limit": 1, "cursor": "", "ordering": field}
            for _ in range(2):  # the first page, then its next link (the cursor made and read back)
                response = client.get(path, params)
                assert response.status_code == 200, (path, field, response.content)
                query = parse_qs(urlparse(response.json()["next"]).query)
                params = {name: values[0] for name, values in query.items()}
    assert walked >= 10


def test_no_list_offers_to_order_by_a_json_document_or_a_many_valued_relation(api_as, admin):
    """The same for the lists the demo leaves empty (policy actions' commands, scheduler nodes' taints, a remediation
    policy's canary racks): refused with a 400 naming `ordering`, and not in the schema's enum."""
    client = api_as(admin)
    lists = _cursor_lists(client.get("/api/schema/", {"format": "json"}).json())
    querysets = {f"/api/{prefix}/": getattr(viewset, "queryset", None) for prefix, viewset, _ in router.registry}
    models = {path: queryset.model for path, queryset in querysets.items() if queryset is not None}
    offered = []
    for path, fields in lists.items():
        model = models.get(path)
        for field in fields if model else ():
            try:
                stored = model._meta.get_field(field.split("__")[0])
            except FieldDoesNotExist:
                continue
            if isinstance(stored, JSONField) or stored.many_to_many or stored.one_to_many:
                offered.append(f"{path}?ordering={field}")
    assert offered == []
    for path, field in [("/api/nics/", "pfc_priorities"), ("/api/remediation-policies/", "-canary_racks")]:
        refused = client.get(path, {"ordering": field})
        assert refused.status_code == 400 and f"Cannot order by '{field}'" in refused.json()["ordering"][0]
