"""The topology API: who may read it, what it returns, and that its schema is clean."""

import json

import pytest
from django.core.management import call_command

from apps.topology.choices import Verdict
from tests.topology.helpers import unplug_plane

pytestmark = pytest.mark.django_db

ENDPOINTS = ["/api/topology/", "/api/topology/rules/"]


@pytest.mark.parametrize("url", ENDPOINTS)
def test_anonymous_is_refused(api_client, url):
    response = api_client.get(url)
    assert response.status_code == 401 and "WWW-Authenticate" in response


@pytest.mark.parametrize("url", ENDPOINTS)
def test_nobody_writes(api_as, admin, url):
    assert api_as(admin).post(url, {}).status_code == 405


def test_viewer_reads_the_rules(api_as, viewer, demo_cluster):
    unplug_plane("gpu005")
    response = api_as(viewer).get("/api/topology/rules/")
    assert response.status_code == 200
    body = response.json()
    assert body["passed"] is False
    by_name = {rule["name"]: rule for rule in body["rules"]}
    assert by_name["dual-plane"]["verdict"] == Verdict.FAIL and by_name["dual-plane"]["offending"] == ["gpu005"]
    assert by_name["pair-bandwidth"]["figures"]["min_pair_gbps"] == 1600
    assert by_name["data-mtu"] == by_name["data-mtu"] | {"verdict": "pass", "passed": True, "offending": []}
    assert set(by_name["dual-plane"]) == {
        "name",
        "title",
        "verdict",
        "passed",
        "detail",
        "offending",
        "offending_count",
        "figures",
        "links",
    }


def test_viewer_reads_the_graph(api_as, viewer, demo_cluster, django_assert_max_num_queries):
    client = api_as(viewer)
    with django_assert_max_num_queries(9):  # the token with its user, then the graph's eight
        response = client.get("/api/topology/")
    assert response.status_code == 200
    body = response.json()
    assert body["passed"] is True and len(body["rules"]) == 6
    assert body["summary"]["compute_nodes"] == 32 and body["summary"]["capacity_gbps_by_plane"]["B"] == 103600
    graph = body["graph"]
    assert len(graph["nodes"]) == 35 and len(graph["switches"]) == 13
    link = next(link for link in graph["links"] if {link["a"], link["b"]} == {"node:gpu001", "switch:leaf-r01-a"})
    assert link["kind"] == "access" and link["plane"] == "A" and link["capacity_gbps"] == 1600
    assert {cable["a"] for cable in link["cables"]} == {
        "gpu001:ens1np0",
        "gpu001:ens3np0",
        "gpu001:ens5np0",
        "gpu001:ens7np0",
    }
    assert link["cables"][0]["b"].startswith("leaf-r01-a:swp") and link["cables"][0]["speed_gbps"] == 400


def test_a_browser_session_works_too(browser_as, viewer, demo_cluster):
    response = browser_as(viewer).get("/api/topology/rules/")
    assert response.status_code == 200 and len(response.json()["rules"]) == 6


def test_schema_generates_without_warnings(tmp_path):
    target = tmp_path / "schema.json"
    call_command(
        "spectacular",
        "--fail-on-warn",
        "--urlconf",
        "tests.topology.schema_urls",
        "--format",
        "openapi-json",
        "--file",
        str(target),
    )
    schema = json.loads(target.read_text())
    assert set(schema["paths"]) == {"/api/topology/", "/api/topology/rules/"}
    rule = schema["components"]["schemas"]["TopologyRule"]
    assert set(rule["required"]) >= {"name", "verdict", "offending", "figures"}
