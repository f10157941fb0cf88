"""REST and pages: anonymous, wrong-role and permitted cases; 400 naming the field with nothing started; reads write
nothing; a finished sweep's page shows its suspects, figures and heatmap."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.benchmarks import services
from apps.benchmarks.models import BenchmarkRun, BenchmarkTest, Reference
from apps.core.text import counted
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_celery(monkeypatch):
    started = []
    monkeypatch.setattr(services, "enqueue", lambda run: started.append(run.public_id))
    return started


def test_anonymous_and_viewer_cannot_start_and_operator_can(
    demo_cluster, api_client, api_as, viewer, operator, no_celery
):
    body = {"suite": "nccl-sweep", "racks": ["r01"], "transport": "sim"}
    assert api_client.post("/api/benchmarks/", body, format="json").status_code in (401, 403)
    assert api_as(viewer).post("/api/benchmarks/", body, format="json").status_code == 403

    response = api_as(operator).post("/api/benchmarks/", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["suite"] == "nccl-sweep" and len(response.json()["nodes"]) == 8
    assert response.json()["round_bound"] == 7
    assert no_celery == [BenchmarkRun.objects.get().public_id]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"suite": "nope"}, "suite"),
        ({"collective": "reduce_all"}, "collective"),
        ({"min_bytes": 2**31, "max_bytes": 2**30}, "min_bytes"),
        ({"max_bytes": 2**35}, "max_bytes"),
        ({"iterations": 0}, "iterations"),
        ({"nodes": ["mgmt01", "gpu001"], "racks": []}, "nodes"),
    ],
)
def test_bad_input_answers_400_naming_the_field(demo_cluster, api_as, operator, body, field):
    payload = {"suite": "nccl", "racks": ["r01"], "transport": "sim", **body}

    response = api_as(operator).post("/api/benchmarks/", payload, format="json")

    assert response.status_code == 400 and field in response.json(), response.content
    assert not BenchmarkRun.objects.exists() and not Job.objects.exists()


@pytest.fixture
def finished_sweep(demo_cluster, inject):
    inject("gpu004", "degraded_cable", "ens5np0", rate_gbps=200)
    run = services.start_run(
        suite="nccl-sweep", targets=services.parse_nodes("rack:r01"), transport="sim", cooldown_seconds=0, queue=False
    )
    return services.execute_run(run=run)


def test_results_list_their_series_and_reads_write_nothing(finished_sweep, api_as, viewer):
    client = api_as(viewer)
    before = BenchmarkTest.objects.order_by("id").values_list("updated", flat=True)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/api/benchmarks/{finished_sweep.public_id}/results/")
        detail = client.get(f"/api/benchmarks/{finished_sweep.public_id}/")
        listing = client.get("/api/benchmarks/")

    assert response.status_code == detail.status_code == listing.status_code == 200
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].split()[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes == [] and list(before) == list(BenchmarkTest.objects.order_by("id").values_list("updated", flat=True))
    results = response.json()["results"]
    assert results[0]["purpose"] == "whole" and len(results[0]["hosts"]) == 8
    assert {"size_bytes", "busbw_gb_per_s", "algbw_gb_per_s", "time_us"} <= set(results[0]["series"][0])
    assert detail.json()["suspects"][0]["node"] == "gpu004" and detail.json()["suspects"][0]["nic"] == "ens5np0"
    assert listing.json()["results"][0]["id"] == str(finished_sweep.public_id)


def test_accept_needs_an_operator_and_makes_baselines(finished_sweep, api_as, viewer, operator):
    url = f"/api/benchmarks/{finished_sweep.public_id}/accept/"
    assert api_as(viewer).post(url).status_code == 403
    response = api_as(operator).post(url)
    assert response.status_code == 200 and response.json()["accepted_by"] == operator.username


def test_references_are_editable_by_operators_with_ordered_tiers(demo_cluster, api_as, viewer, operator):
    reference = Reference.objects.get(sku_name="H200 SXM", fabric="roce-8x400g")
    url = f"/api/benchmark-references/{reference.public_id}/"
    assert api_as(viewer).patch(url, {"expected_gb_per_s": 380}, format="json").status_code == 403
    assert api_as(operator).patch(url, {"warn_gb_per_s": 400}, format="json").status_code == 400
    assert api_as(operator).patch(url, {"expected_gb_per_s": 380}, format="json").status_code == 200
    reference.refresh_from_db()
    assert reference.expected_gb_per_s == 380


def test_benchmarks_page_lists_suites_runs_and_references(finished_sweep, browser_as, viewer, client):
    assert client.get("/benchmarks/").status_code == 302  # anonymous: to the login page
    page = browser_as(viewer).get("/benchmarks/").content.decode()
    assert "nccl-sweep" in page and "H200 SXM" in page and str(finished_sweep.public_id) in page


def test_run_page_shows_suspects_the_busbw_figure_and_the_heatmap(finished_sweep, browser_as, viewer):
    page = browser_as(viewer).get(f"/benchmarks/runs/{finished_sweep.public_id}/").content.decode()

    assert 'id="suspects"' in page and "gpu004" in page and "ens5np0" in page and "leaf-r01-a" in page
    assert 'data-plotly-figure="busbw-figure"' in page and 'data-plotly-figure="sweep-heatmap"' in page
    figure = json.loads(page.split('<script id="busbw-figure" type="application/json">')[1].split("</script>")[0])
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert all(text.endswith(("B", "KiB", "MiB", "GiB")) for text in figure["layout"]["xaxis"]["ticktext"])  # not "1B"
    tests = finished_sweep.tests.count()
    assert sum(1 for trace in figure["data"] if trace["name"].endswith(")")) == tests  # every test a line (was 2 of 8)
    assert any(trace["name"].startswith("expected 360") for trace in figure["data"])
    heatmap = json.loads(page.split('<script id="sweep-heatmap" type="application/json">')[1].split("</script>")[0])
    assert heatmap["data"][1]["x"] == ["gpu004"] and "/nodes/" in heatmap["data"][1]["customdata"][0]
    # The rounds run and their bound in one phrase (was "0 round(s) (bound 9)"); the targets in words, not a dict.
    run = finished_sweep
    assert run.round_count > 0
    assert "round" not in run.summary  # counted once, beside it (was "7 rounds, 28 tests · 7 rounds")
    assert f'<span id="run-rounds">{counted(run.round_count, "round")} of at most {run.round_bound}</span>' in page
    assert '<span id="run-targets">racks r01</span>' in page and "{&#x27;racks&#x27;" not in page
    # The run is over: the polled fragment stops htmx's polling (286) and the page stays as it is.
    live = browser_as(viewer).get(f"/benchmarks/runs/{run.public_id}/live/", HTTP_HX_REQUEST="true")
    assert live.status_code == 286 and "HX-Refresh" not in live
    assert 'hx-trigger="every 2s"' not in page


def test_start_form_errors_and_start(demo_cluster, browser_as, viewer, operator, no_celery):
    data = {
        "suite": "nccl",
        "scope": "nodes",
        "nodes": "gpu001",
        "collective": "all_reduce",
        "min_bytes": "2G",
        "max_bytes": "1G",
        "transport": "sim",
        "cooldown_seconds": "0",
    }
    assert browser_as(viewer).post("/benchmarks/start/", data).status_code == 403
    response = browser_as(operator).post("/benchmarks/start/", data)
    assert response.status_code == 400 and "smallest size is above the largest" in response.content.decode()
    response = browser_as(operator).post("/benchmarks/start/", {**data, "nodes": "mgmt01"} | {"min_bytes": "8"})
    assert response.status_code == 400 and "no GPUs" in response.content.decode()
    response = browser_as(operator).post("/benchmarks/start/", {**data, "min_bytes": "8", "iterations": "1001"})
    assert response.status_code == 400 and "<li>Iterations: Ensure this value is less than or equal to 1000" in (
        response.content.decode()
    )
    assert not BenchmarkRun.objects.exists()

    response = browser_as(operator).post("/benchmarks/start/", {**data, "min_bytes": "8", "nodes": "rack:r01"})
    run = BenchmarkRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/runs/{run.public_id}/"
    assert run.nodes.count() == 8 and no_celery == [run.public_id]
    assert run.parameters["iterations"] == 20  # the field left empty: nccl-tests' default


def test_the_start_forms_errors_read_by_the_fields_labels(demo_cluster, browser_as, operator, no_celery):
    """What the service refuses lands on the field it names and the list above the form reads the field's label
    ("Smallest size: …"), never the code's name ("min_bytes: …")."""
    data = {"suite": "nccl", "scope": "nodes", "nodes": "gpu001", "collective": "all_reduce", "min_bytes": "0"}
    data |= {"max_bytes": "1G", "transport": "sim", "cooldown_seconds": "0"}
    response = browser_as(operator).post("/benchmarks/start/", data)

    assert response.status_code == 400
    assert "The smallest size is 8 B to 16 GiB" in str(response.context["form"].errors["min_bytes"])
    page = response.content.decode()
    assert "<li>Smallest size: The smallest size is 8 B" in page and "min_bytes:" not in page
    assert not BenchmarkRun.objects.exists()


def test_run_list_query_count_does_not_grow_with_runs(demo_cluster, api_as, viewer, no_celery):
    client = api_as(viewer)

    def count_queries():
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/benchmarks/").status_code == 200
        return len(queries.captured_queries)

    services.start_run(suite="nccl", targets=services.parse_nodes("gpu001"), transport="sim")
    one = count_queries()
    for rack in ("r01", "r02", "r03"):
        services.start_run(suite="nccl-sweep", targets=services.parse_nodes(f"rack:{rack}"), transport="sim")
    assert count_queries() == one


def test_the_start_form_marks_each_suites_own_fields(demo_cluster, browser_as, operator):
    """Sizes, collective and iterations are NCCL's, the cool-down the sweep's and pairwise's, the soak burn-in's and
    N HPL's: the form shows each for its suites only (static/js/kind_fields.js), not every field for every suite
    (issue 27, walk 11)."""
    import re

    html = browser_as(operator).get("/benchmarks/").content.decode()
    form = html.split('id="benchmark-form" data-kind-field="suite">')[1].split("</form>")[0]
    labels = re.findall(r'<label data-shown-for="([^"]+)"[^>]*>(.*?)</label>', form, re.S)
    shown = {re.search(r'name="(\w+)"', inner)[1]: suites for suites, inner in labels}
    assert shown == {
        "collective": "nccl nccl-pairwise nccl-sweep",
        "min_bytes": "nccl nccl-pairwise nccl-sweep",
        "max_bytes": "nccl nccl-pairwise nccl-sweep",
        "iterations": "nccl nccl-pairwise nccl-sweep",
        "cooldown_seconds": "nccl-sweep nccl-pairwise",
        "duration_seconds": "burn-in",
        "burn_load": "burn-in",
        "hpl_n": "hpl-mxp hpl",
    }
    assert re.search(r'<label>Suite <select name="suite"', form)  # the suite and the nodes show for every suite
    assert "js/kind_fields.js" in html


def test_the_start_form_shows_the_chosen_scopes_input_only(demo_cluster, browser_as, operator):
    """ "Nodes" picks a rack, a tag or names: the rack list shows for a rack only, the tag list for a tag, the names for
    names (each follows the scope, not the suite); all three showed whichever was picked."""
    import re

    html = browser_as(operator).get("/benchmarks/").content.decode()
    form = html.split('id="benchmark-form"')[1].split("</form>")[0]
    labels = re.findall(r'<label data-kind-field="scope" data-shown-for="([^"]+)">(.*?)</label>', form, re.S)
    assert {re.search(r'name="(\w+)"', inner)[1]: scope for scope, inner in labels} == {
        "rack": "rack",
        "tag": "tag",
        "nodes": "nodes",
    }
