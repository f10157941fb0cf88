"""API lists order by the columns their pages sort by (`?ordering=`, apps/core/filters.ListOrderingFilter): a field a
list does not order by is a 400 naming `ordering` (DRF alone would drop it and answer in another order), and the
schema lists the fields each list takes."""

import pytest

from apps.benchmarks.filters import BENCHMARK_RUN_COLUMNS
from apps.core.listing import sort_fields
from apps.deployments.filters import DEPLOYMENT_COLUMNS
from apps.diagnosis.filters import INCIDENT_COLUMNS
from apps.jobs.filters import JOB_COLUMNS
from apps.jobs.models import Job
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
