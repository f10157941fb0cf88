"""The topology page as an operator sees it."""

import json
import re

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.templatetags.static import static

from apps.accounts.choices import Role
from tests.topology.helpers import delete_leaf_uplinks

pytestmark = pytest.mark.django_db


def test_anonymous_users_are_sent_to_log_in(client):
    response = client.get("/topology/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.OPERATOR, Role.ADMIN])
def test_every_role_sees_the_map_and_the_rules(browser_as, make_user, demo_cluster, role):
    page = browser_as(make_user(role)).get("/topology/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-plotly-figure="topology-figure"' in html and 'id="topology-figure"' in html
    figure = json.loads(html.split('<script id="topology-figure" type="application/json">')[1].split("</script>")[0])
    assert {trace["name"] for trace in figure["data"]} >= {"Plane A links", "Compute nodes", "Switches"}
    assert "Bandwidth between any two compute nodes ≥ 200 Gb/s on each plane" in html
    assert html.count('class="rule pass"') == 6
    assert "103.6 Tb/s" in html and "Gbps" not in html  # installed capacity of plane A, in the pages' unit
    assert page.context["summary"].compute_nodes == 32


def test_plotly_comes_from_our_static_files(browser_as, viewer, demo_cluster):
    html = browser_as(viewer).get("/topology/").content.decode()
    # Through static(): hashed names once collectstatic has run into var/, plain ones before.
    assert static("vendor/plotly/plotly.min.js") in html and static("js/charts.js") in html
    # Every script is ours: none from another host (a CDN). Not "cdn" anywhere: a CSRF token may spell it.
    sources = re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", html)
    assert sources and all(source.startswith(settings.STATIC_URL) for source in sources), sources
    assert finders.find("vendor/plotly/plotly.min.js") and finders.find("js/charts.js")


def test_failing_rules_show_what_breaks_them(browser_as, viewer, demo_cluster):
    delete_leaf_uplinks("leaf-r01-a")
    html = browser_as(viewer).get("/topology/").content.decode()
    assert html.count('class="rule fail"') == 2
    failing = html.split('id="rule-leaf-oversubscription"')[1].split('<div class="rule')[0]
    assert "leaf-r01-a" in failing and "no uplinks" in failing
    assert "<th>uplink gbps</th>" in failing  # the per-leaf table
    bandwidth = html.split('id="rule-pair-bandwidth"')[1].split('<div class="rule')[0]
    assert "gpu001, gpu002" in bandwidth and "Fail" in bandwidth


def test_page_on_an_empty_inventory(browser_as, viewer):
    page = browser_as(viewer).get("/topology/")
    assert page.status_code == 200 and b"Could not run" in page.content


def test_the_page_reads_the_recorded_evaluation_and_an_edit_shows_once_recorded(
    browser_as, viewer, db, monkeypatch, django_capture_on_commit_callbacks
):
    from apps.inventory.demo import DEMO, load_cluster
    from apps.topology import services
    from portal.celery import app as celery_app

    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)  # the recording task runs here, as a worker
    with django_capture_on_commit_callbacks(execute=True):
        load_cluster(DEMO)  # recorded once its transaction commits
    real = services.evaluate_topology
    monkeypatch.setattr(services, "evaluate_topology", lambda: pytest.fail("a view evaluated the topology"))
    client = browser_as(viewer)
    first = client.get("/topology/").content.decode()
    again = client.get("/topology/").content.decode()

    def content(html):
        return html.split('id="topology-summary"')[1].split("</main>")[0]

    assert content(first) == content(again) and first.count('class="rule pass"') == 6
    assert len(services.rule_summary().rules) == 6  # the dashboard reads the same record

    monkeypatch.setattr(services, "evaluate_topology", real)
    with django_capture_on_commit_callbacks(execute=True):
        delete_leaf_uplinks("leaf-r01-a")
    changed = client.get("/topology/").content.decode()
    assert changed.count('class="rule fail"') == 2


def test_the_maps_colours_have_a_key(browser_as, viewer, demo_cluster):
    """Nodes are coloured by status and switches by plane, which Plotly's legend (one entry per trace) did not say
    (issue 27, walk 11): the key under the map names every colour the markers take."""
    from apps.topology.charts import COLOURS, PLANE_COLOURS

    html = browser_as(viewer).get("/topology/").content.decode()
    key = html.split('id="topology-key">')[1].split("</p>")[0]
    for label in ("Ready", "Degraded", "Failed", "Plane A", "Plane B", "Management", "Named by a failing rule"):
        assert label in key
    figure = json.loads(html.split('<script id="topology-figure" type="application/json">')[1].split("</script>")[0])
    drawn = set()
    for trace in figure["data"]:
        colour = trace.get("marker", {}).get("color") or []
        drawn |= {colour} if isinstance(colour, str) else set(colour)
    keyed = set(re.findall(r"background: (#[0-9a-f]{6})", key))
    assert drawn and drawn <= keyed
    assert keyed >= {COLOURS["green"], PLANE_COLOURS["A"]}
