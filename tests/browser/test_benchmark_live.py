"""An operator starts a two-node NCCL benchmark from the form in a real browser and watches the run page: the
busbw-vs-size plot gets its points from nccl-tests' rows (job events over the websocket), in size order, without a
reload, then the stored verdict shows. The simulator runs in real time here (RACKPILOT_SIM_REAL_TIME), so the run is
still going when its page first renders (~23 s for 8 B - 16 GiB across two nodes at 60 iterations a size).

How many rows the page plots before the run ends is timing, which a loaded machine decides: the test asserts the
rows' order and content, not that some arrived before others (the websocket's replay-then-stream is
tests/jobs/test_consumers.py's)."""

import re

import pytest

from apps.accounts.choices import Role
from apps.benchmarks.models import BenchmarkRun
from apps.jobs.models import JobEvent
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROWS = 32  # 8 B to 16 GiB, factor 2


@pytest.fixture
def live_server_env():
    return {"RACKPILOT_SIM_REAL_TIME": "1"}


def test_the_run_page_plots_each_row_as_it_arrives_then_shows_the_verdict(
    demo_cluster, shipped_references, live_server_url, browser_page
):
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    page = browser_page
    page.set_default_timeout(60000)
    log_in(page, live_server_url, "op")
    page.goto(f"{live_server_url}/benchmarks/")
    page.select_option("#benchmark-form select[name=suite]", "nccl")
    page.select_option("#benchmark-form select[name=scope]", "nodes")
    page.fill("#benchmark-form input[name=nodes]", "gpu001,gpu002")
    page.fill("#benchmark-form input[name=min_bytes]", "8")
    page.fill("#benchmark-form input[name=max_bytes]", "16G")
    page.fill("#benchmark-form input[name=iterations]", "60")
    page.select_option("#benchmark-form select[name=transport]", "sim")
    page.click("#benchmark-form button[type=submit]")
    page.wait_for_url("**/benchmarks/runs/*-*/")
    page.evaluate("window.notReloaded = true")
    # An operator may cancel the run while it is active. Looked for on the page as it first renders: on a loaded
    # machine the run can end before the first plotted row is seen, and the button rightly goes with it.
    page.wait_for_selector("#cancel-run button", state="visible")

    # Every row is plotted, in size order, without a reload.
    page.wait_for_function(f"window.rackpilotBenchLive && window.rackpilotBenchLive.points() === {ROWS}")
    [line] = page.evaluate("window.rackpilotBenchLive.lines()")
    # Named as the results name the test: both nodes, not only the one that launched it.
    assert line["key"] == "round 1 gpu001+gpu002" and line["x"] == [8 * 2**k for k in range(ROWS)]
    assert 300 < line["y"][-1] < 400  # 8 x 400G RoCE across two nodes
    traces = page.evaluate("document.getElementById('live-busbw').data.length")
    assert traces == 1 and page.evaluate("document.getElementById('live-busbw').data[0].x.length") == ROWS

    # The stored verdict follows in the results part (htmx), still without a reload.
    page.wait_for_function("document.getElementById('run-status')?.textContent.trim() === 'Succeeded'")
    run = BenchmarkRun.objects.get()
    assert run.parameters["iterations"] == 60
    [test] = run.tests.all()
    assert page.locator("#tests .badge").first.inner_text() == test.get_verdict_display() == "Pass"
    assert page.locator("#cancel-run").count() == 0  # gone with the run's end, without a reload
    assert page.evaluate("window.notReloaded") is True
    assert [round(value, 1) for value in line["y"]] == [round(row["busbw_gb_per_s"], 1) for row in test.series], (
        "the live points are the rows the run stored"
    )


@pytest.fixture
def run_with_ended_rounds(demo_cluster, shipped_references):
    """A pairwise run over three nodes, run here before the browser starts (its event loop would refuse the sim's),
    then marked running again: its rounds have ended, the run has not. With its nccl-tests rows as the page reads
    them (benchmark_live.js's ROW, Open MPI's tag stripped)."""
    from apps.benchmarks import services
    from apps.benchmarks.choices import RunStatus

    run = services.start_run(
        suite="nccl-pairwise",
        targets=services.parse_nodes("gpu001,gpu002,gpu003"),
        transport="sim",
        queue=False,
        cooldown_seconds=0,
    )
    run = services.execute_run(run=run)
    row = re.compile(r"^(\[\d+,\d+\]<stdout>:)?\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\S+")
    outputs = JobEvent.objects.filter(job__benchmark_round__run=run, level="output").values_list("message", flat=True)
    rows = sum(1 for message in outputs if row.match(message))
    BenchmarkRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    return run, rows


def test_rounds_that_ended_before_the_page_opened_are_plotted_from_their_replay(
    run_with_ended_rounds, live_server_url, browser_page
):
    """A fast run's early rounds end before the page's sockets open: the socket's first frame says the job ended, and
    the page closed it there, before the replay (a pairwise run on the demo plotted "0 rows; the run has ended")."""
    run, rows = run_with_ended_rounds
    assert run.rounds.count() >= 2 and rows > 0
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    page = browser_page
    page.set_default_timeout(60000)
    log_in(page, live_server_url, "op")
    page.goto(f"{live_server_url}/benchmarks/runs/{run.public_id}/")

    page.wait_for_function(f"window.rackpilotBenchLive && window.rackpilotBenchLive.points() === {rows}")
    page.wait_for_function("document.getElementById('live-state')?.textContent.endsWith('the run has ended')")
    assert page.inner_text("#live-state") == f"{rows} rows; the run has ended"
