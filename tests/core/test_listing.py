"""The list pages (apps/core/listing.py): each sorts by a column both ways in the database, refuses a column it does not
have with a message, keeps its filters and sort in its links, and exports as CSV exactly the rows it lists (the same
filters and order, every page), formulas escaped."""

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.text import capfirst

from apps.benchmarks.models import BenchmarkRun
from apps.core import csvsafe
from apps.deployments.models import Deployment
from apps.diagnosis.models import Incident
from apps.inventory.models import Node, Switch
from apps.jobs.choices import JobStatus
from apps.jobs.models import Job
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def _jobs(kind: str):
    Job.objects.create(kind=kind, transport="sim", node_count=3, summary="=cmd|' /C calc'!A0")
    Job.objects.create(kind=kind, transport="sim", node_count=1, status=JobStatus.SUCCEEDED, summary="fine")
    Job.objects.create(kind=kind, transport="sim", node_count=7, status=JobStatus.FAILED, summary="+1 bad")
    Job.objects.create(kind="other-kind", transport="sim", node_count=5)


def _deployments():
    for name, state in (("beta", "draft"), ("alpha", "draft"), ("gamma", "canceled")):
        Deployment.objects.create(name=name, state=state)


def _incidents():
    for title, state in (("c disk full", "open"), ("b slow ring", "open"), ("a lost rank", "resolved")):
        Incident.objects.create(title=title, state=state, node=make_node())


def _runs():
    BenchmarkRun.objects.create(suite="nccl", transport="sim", round_count=1, summary="@SUM(A1)")
    BenchmarkRun.objects.create(suite="nccl", transport="sim", round_count=4, summary="ok")
    BenchmarkRun.objects.create(suite="nccl-sweep", transport="sim", round_count=9, summary="sweep")


@dataclass(frozen=True)
class ListCase:
    url: str
    seed: Callable[[], None]
    sort: str  # a column's name
    key: Callable[[Any], Any]  # that column's value, read from a listed object
    filters: dict  # narrows the list
    count: Callable[[], int]  # how many rows those filters leave, counted independently of the page


CASES = {
    "nodes": ListCase(
        "node-list",
        lambda: None,
        "status",
        lambda node: node.status,
        {"role": "compute"},
        lambda: Node.objects.filter(role="compute").count(),
    ),
    "racks": ListCase(
        "rack-list",
        lambda: None,
        "full_load_kw",
        lambda rack: rack.full_load_w,
        {"row": "A"},
        lambda: 4,  # the demo's four GPU racks in row A (net01 is in row B)
    ),
    "switches": ListCase(
        "switch-list",
        lambda: None,
        "tier",
        lambda switch: switch.tier,
        {"plane": "A"},
        lambda: Switch.objects.filter(plane="A").count(),
    ),
    "jobs": ListCase(
        "jobs-page",
        lambda: _jobs("shell-check"),
        "nodes",
        lambda job: job.node_count,
        {"kind": "shell-check"},
        lambda: 3,
    ),
    "deployments": ListCase("deployment-list", _deployments, "name", lambda d: d.name, {"state": "draft"}, lambda: 2),
    "incidents": ListCase("incident-list", _incidents, "title", lambda i: i.title, {"state": "open"}, lambda: 2),
    "benchmarks": ListCase("benchmarks", _runs, "rounds", lambda run: run.round_count, {"suite": "nccl"}, lambda: 2),
    "discovery": ListCase(
        "discovery",
        lambda: _jobs("discover"),
        "nodes",
        lambda job: job.node_count,
        {"status": "failed"},
        lambda: 1,
    ),
}


def _csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.parametrize("name", CASES)
def test_a_list_sorts_by_a_column_both_ways_with_an_arrow(browser_as, viewer, demo_cluster, name):
    case = CASES[name]
    case.seed()
    page = browser_as(viewer)
    up = page.get(reverse(case.url), {"sort": case.sort})
    down = page.get(reverse(case.url), {"sort": f"-{case.sort}"})
    ups = [case.key(row) for row in up.context["object_list"]]
    downs = [case.key(row) for row in down.context["object_list"]]
    assert len(set(ups)) > 1, "the case needs rows that differ in the sorted column"
    assert ups == sorted(ups) and downs == sorted(downs, reverse=True)
    header = next(h for h in up.context["listing"].headers if h.arrow)
    assert header.arrow == "▲" and f"sort=-{case.sort}" in header.url  # clicking it again reverses
    assert "▼" in down.content.decode()


@pytest.mark.parametrize("name", CASES)
def test_an_unknown_sort_column_is_a_message_naming_the_columns(browser_as, viewer, demo_cluster, name):
    case = CASES[name]
    case.seed()
    page = browser_as(viewer)
    response = page.get(reverse(case.url), {"sort": "password"})
    assert response.status_code == 400
    text = response.content.decode()
    assert 'id="sort-error"' in text and "“password”" in text and case.sort in text
    assert page.get(reverse(case.url), {"sort": "password", "export": "csv"}).status_code == 400


@pytest.mark.parametrize("name", CASES)
def test_the_csv_export_is_the_filtered_sorted_list(browser_as, viewer, demo_cluster, name):
    case = CASES[name]
    case.seed()
    page = browser_as(viewer)
    query = {**case.filters, "sort": f"-{case.sort}"}
    shown = page.get(reverse(case.url), query)
    listing = shown.context["listing"]
    assert "export=csv" in listing.export_url and f"sort=-{case.sort}" in listing.export_url
    rows = _csv(page.get(reverse(case.url), {**query, "export": "csv"}))
    assert rows[0] == [column.name for column in listing.columns]
    assert len(rows) - 1 == case.count() == shown.context["paginator"].count
    expected = [[str(column.cell(row)) for column in listing.columns] for row in shown.context["object_list"]]
    assert [[csvsafe.unescape(cell) for cell in row] for row in rows[1 : len(expected) + 1]] == expected


@pytest.mark.parametrize("name", ["jobs", "incidents", "benchmarks"])
def test_the_csv_export_writes_formulas_as_text(browser_as, viewer, name):
    case = CASES[name]
    case.seed()
    if name == "incidents":
        Incident.objects.create(title="=HYPERLINK(1)", node=make_node())
    rows = _csv(browser_as(viewer).get(reverse(case.url), {"export": "csv"}))
    cells = [cell for row in rows[1:] for cell in row]
    leads = [cell for cell in cells if cell[:1] in csvsafe.FORMULA_LEADS]
    assert not leads, leads
    assert any(cell.startswith("'=") or cell.startswith("'+") or cell.startswith("'@") for cell in cells)


def test_pages_keep_filters_and_sort_and_the_export_has_every_page(browser_as, viewer, demo_cluster):
    for n in range(60):
        make_node(hostname=f"extra{n:03d}", role="storage")
    page = browser_as(viewer)
    first = page.get(reverse("node-list"), {"role": "storage", "sort": "-hostname"})
    assert len(first.context["object_list"]) == 50 and first.context["object_list"][0].hostname == "extra059"
    text = first.content.decode()
    assert "?role=storage&amp;sort=-hostname&page=2" in text
    second = page.get(reverse("node-list"), {"role": "storage", "sort": "-hostname", "page": 2})
    assert [node.hostname for node in second.context["object_list"]] == [f"extra{n:03d}" for n in range(9, -1, -1)]
    # the headers' links keep the filter and drop the page
    header = next(h for h in second.context["listing"].headers if h.label == "Rack")
    assert header.url == "?role=storage&sort=rack"
    rows = _csv(page.get(reverse("node-list"), {"role": "storage", "sort": "-hostname", "export": "csv"}))
    assert [row[0] for row in rows[1:]] == [f"extra{n:03d}" for n in range(59, -1, -1)]


def test_a_sorted_page_costs_the_same_queries_for_more_nodes(browser_as, viewer, demo_cluster):
    page = browser_as(viewer)
    page.get(reverse("node-list"))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert page.get(reverse("node-list"), {"sort": "-gpus"}).status_code == 200
        return len(captured)

    before = queries()
    for n in range(40):
        make_node(hostname=f"more{n:03d}")
    assert queries() == before


def test_the_audit_log_sorts_and_its_exports_follow(browser_as, viewer, operator, admin):
    from apps.core import audit
    from apps.core.choices import ChangeSource

    node = make_node(hostname="gpu950")
    for user, comment in ((operator, "one"), (admin, "two")):
        with audit.audit_context(source=ChangeSource.UI, user=user):
            node.comments = comment
            node.save()
    page = browser_as(viewer)
    up = page.get(reverse("audit-log"), {"object": "gpu950", "sort": "who"})
    who = [entry.actor_name for entry in up.context["object_list"]]
    assert len(set(who)) == 3 and who == sorted(who)
    exported = _csv(page.get(reverse("audit-export-csv"), {"object": "gpu950", "sort": "-who"}))
    assert [row[1] for row in exported[1:]][:2] == ["operator", "admin"]
    assert page.get(reverse("audit-log"), {"sort": "nope"}).status_code == 400
    assert page.get(reverse("audit-export-csv"), {"sort": "nope"}).status_code == 400


def test_a_filter_that_joins_still_sorts_by_a_related_column(browser_as, viewer):
    # The incident list's node filter is a DISTINCT query; sorting it by a joined column must still work (PostgreSQL
    # wants ORDER BY expressions in a DISTINCT's select list).
    node = make_node(hostname="gpu777")
    for title in ("one", "two"):
        Incident.objects.create(title=title, node=node)
    Incident.objects.create(title="elsewhere", node=make_node())
    page = browser_as(viewer)
    for sort in ("about", "-about", "-opened"):
        response = page.get(reverse("incident-list"), {"node": "gpu777", "sort": sort})
        assert response.status_code == 200
        assert sorted(incident.title for incident in response.context["object_list"]) == ["one", "two"]
    run = BenchmarkRun.objects.create(suite="nccl", transport="sim", summary="on gpu777")
    run.nodes.add(node)
    rows = _csv(page.get(reverse("benchmarks"), {"node": "gpu777", "sort": "-by", "export": "csv"}))
    assert [row[7] for row in rows[1:]] == ["on gpu777"]


# A value each list's filter set refuses (a choice it does not have, a site that does not exist).
BAD_FILTERS = {
    "nodes": {"rack": "no-such-rack"},
    "racks": {"site": "no-such-site"},
    "switches": {"site": "no-such-site"},
    "incidents": {"state": "no-such-state"},
    "benchmarks": {"suite": "no-such-suite"},
    "discovery": {"status": "no-such-status"},
    "jobs": {"status": "no-such-status"},
    "deployments": {"state": "no-such-state"},
}


@pytest.mark.parametrize("name", BAD_FILTERS)
def test_a_filter_that_is_not_valid_shows_its_error_and_no_rows(browser_as, viewer, demo_cluster, name):
    case = CASES[name]
    case.seed()
    ((field, value),) = BAD_FILTERS[name].items()
    page = browser_as(viewer)
    shown = page.get(reverse(case.url), {field: value})
    assert shown.status_code == 200
    assert field in shown.context["filter"].errors
    assert shown.context["paginator"].count == 0
    assert 'class="errorlist"' in shown.content.decode()
    label = capfirst(shown.context["filter"].form[field].label)  # the words the filter form shows, not the code's
    assert f"<li>{label}: " in shown.content.decode() and f"<li>{field}: " not in shown.content.decode()
    assert len(_csv(page.get(reverse(case.url), {field: value, "export": "csv"}))) == 1  # the header only
    assert page.get(reverse(case.url)).context["paginator"].count > 0  # the same list unfiltered has rows
