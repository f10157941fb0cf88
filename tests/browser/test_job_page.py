"""An operator starts a job in a real browser and watches it live: cells turn green, progress reaches 100%, and a
websocket dropped mid-run loses no event."""

import pytest

from apps.accounts.choices import Role
from apps.jobs.models import Job, JobEvent
from tests import factories
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.wirings  # make run's wiring end to end
def test_operator_watches_a_job_live_and_a_dropped_socket_loses_nothing(live_server_url, browser_page):
    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    for i in range(4):
        factories.make_node(hostname=f"b{i}")
    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")
    page.goto(f"{live_server_url}/jobs/new/")
    page.select_option("select[name=kind]", "sleep")
    page.select_option("select[name=transport]", "local")
    page.select_option("select[name=nodes]", ["b0", "b1", "b2", "b3"])
    page.fill("textarea[name=parameters]", '{"seconds": 1.5, "steps": 3}')
    page.click("#start-job")
    page.wait_for_url("**/jobs/*-*/")
    assert page.locator("td.cell").count() == 12

    # Live: the first column turns green while the page is never reloaded.
    page.wait_for_function("document.querySelectorAll('td.cell.green').length >= 4")
    assert page.evaluate("window.rackpilotJob.state.mode") == "live"
    page.evaluate("window.rackpilotJob.dropSocket()")  # the network blinks mid-run
    page.wait_for_function("document.querySelectorAll('td.cell.green').length === 12")
    page.wait_for_function("document.getElementById('progress-percent')?.textContent === '100%'")
    page.wait_for_function("document.getElementById('job-status')?.textContent === 'Succeeded'")

    job = Job.objects.get(public_id=page.url.rstrip("/").rsplit("/", 1)[1])  # the page's (periodic reads run too)
    assert job.status == "succeeded"
    page.wait_for_function(f"window.rackpilotJob.state.lastSeq === {job.last_seq}")
    seqs = page.evaluate("window.rackpilotJob.seqs()")
    assert seqs == list(range(1, job.last_seq + 1)), "an event is missing or repeated in the page's log"
    rows = page.locator("#log .ev[data-seq]").count()
    assert rows == JobEvent.objects.filter(job=job).count()

    # The job list shows it too.
    page.goto(f"{live_server_url}/jobs/")
    assert page.locator(f'tr[data-job="{job.public_id}"] [data-field=status]').inner_text() == "Succeeded"


def test_the_job_page_says_why_when_the_socket_is_refused(live_server_url, browser_page):
    """The server accepts, then closes with a code (here 4401: the session is gone); the page says why in words and
    does not keep reconnecting."""
    from django.contrib.sessions.models import Session

    from apps.jobs import services

    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    node = factories.make_node(hostname="w0")
    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")
    job = services.create_job(
        kind="sleep", targets=services.TargetSpec(nodes=(node.hostname,)), parameters={"seconds": 30}, transport="local"
    )
    page.goto(f"{live_server_url}/jobs/{job.public_id}/")
    page.wait_for_function("window.rackpilotJob.state.mode === 'live'")  # queued: no worker has it here
    Session.objects.all().delete()  # signed out elsewhere
    page.evaluate("window.rackpilotJob.dropSocket()")
    page.wait_for_function("window.rackpilotJob.state.mode === 'denied'")
    assert page.locator("#conn-state").inner_text() == "not live: you are signed out; reload the page to sign in again"


def test_a_job_that_ends_while_its_page_is_open_shows_when_it_ran_and_drops_its_cancel_button(
    live_server_url, browser_page
):
    """Opened while queued (no start time, a Cancel button); the job then runs and ends without a reload. Here the
    job runs in the test's own process, so the page hears of it when its socket reconnects (the state frame every
    connection starts with), the same path as a live push."""
    import threading

    from django.db import connections

    from apps.jobs import executor, services

    factories.make_user(role=Role.OPERATOR, username="op", password="correct-horse-battery")
    node = factories.make_node(hostname="e0")
    page = browser_page
    page.set_default_timeout(30000)
    log_in(page, live_server_url, "op")
    job = services.create_job(
        kind="sleep",
        targets=services.TargetSpec(nodes=(node.hostname,)),
        parameters={"seconds": 0.1},
        transport="local",
    )
    page.goto(f"{live_server_url}/jobs/{job.public_id}/")
    page.wait_for_function("window.rackpilotJob.state.mode === 'live'")
    assert page.locator("#job-started").inner_text() == "—"
    assert page.locator("#cancel-button").is_visible()

    def run_it():
        try:
            executor.run_shard(job_public_id=str(job.public_id), index=0)
        finally:
            connections.close_all()  # this thread's own connection, or PostgreSQL keeps the test database open

    # Playwright's loop runs in this thread; the executor runs its own, so it gets a thread of its own.
    runner = threading.Thread(target=run_it)
    runner.start()
    runner.join(60)
    job.refresh_from_db()
    assert job.status == "succeeded"
    page.evaluate("window.rackpilotJob.dropSocket()")

    page.wait_for_function("document.getElementById('job-status')?.textContent === 'Succeeded'")
    assert page.locator("#job-started").inner_text() == job.started.strftime("%Y-%m-%d %H:%M:%S")
    assert page.locator("#job-finished").inner_text() == job.finished.strftime("%Y-%m-%d %H:%M:%S")
    assert page.locator("#cancel-button").count() == 0
    assert page.locator("#progress-percent").inner_text() == "100%"
