"""Canceling a whole benchmark run: the round's job is canceled (its cool-down cut short), no further round starts, the
run ends canceled with its tests kept, audited; through the service, the API (operators; 409 once ended), the run
page's button and Ctrl-C on `manage.py benchmark run`."""

import os
import signal
import threading
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.benchmarks import services
from apps.benchmarks.choices import Purpose, RunStatus
from apps.benchmarks.models import BenchmarkRun, Round
from apps.core.choices import AuditAction
from apps.core.models import AuditEntry
from apps.core.text import counted
from apps.core.threads import thread_connection_returned
from apps.jobs.choices import JobStatus

pytestmark = pytest.mark.django_db(transaction=True)

COOLDOWN = 900.0  # far longer than the test may take, however loaded the machine: a wait not cut short fails it


@pytest.fixture(autouse=True)
def no_celery(monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda run: None)


def start_sweep(cooldown: float = COOLDOWN) -> BenchmarkRun:
    return services.start_run(
        suite="nccl-sweep",
        targets=services.parse_nodes("rack:r01"),
        transport="sim",
        cooldown_seconds=cooldown,
        queue=False,
    )


def cooling_round(run: BenchmarkRun, timeout: float = 240.0) -> Round:
    """Wait until the run's confirm round (the one with the cool-down) has its job running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        round_ = Round.objects.filter(run=run, cooldown_seconds__gt=0, job__status=JobStatus.RUNNING).first()
        if round_ is not None:
            return round_
        time.sleep(0.1)
    raise AssertionError(f"no round started its cool-down: {list(run.rounds.values_list('index', 'job__status'))}")


def execute_in_thread(run: BenchmarkRun) -> threading.Thread:
    def work():
        with thread_connection_returned():
            services.execute_run(run=run)

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_a_cancel_cuts_the_cool_down_short_and_keeps_what_was_measured(inject, operator):
    inject("gpu004", "degraded_cable", "ens5np0", rate_gbps=200)
    run = start_sweep()
    thread = execute_in_thread(run)
    cooling = cooling_round(run)
    rounds_before = run.rounds.count()
    asked = time.monotonic()

    services.cancel_run(run=run, user=operator)
    thread.join(timeout=COOLDOWN / 2)

    assert not thread.is_alive() and time.monotonic() - asked < COOLDOWN / 2  # not the cool-down
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELED and run.finished is not None
    assert run.summary.startswith(f"canceled by {operator.username} after {counted(rounds_before, 'round')}"), (
        run.summary
    )
    assert run.rounds.count() == rounds_before  # no further round started
    cooling.job.refresh_from_db()
    assert cooling.job.status == JobStatus.CANCELED
    kept = run.tests.exclude(purpose=Purpose.CONFIRM)
    assert kept.exists() and all(test.busbw_gb_per_s for test in kept)  # the rounds before the cancel stay
    assert not run.suspects.exists()  # the isolate alone names nobody: the re-test never ran
    entry = AuditEntry.objects.get(action=AuditAction.CANCEL, object_type="benchmarks.benchmarkrun")
    assert entry.object_id == str(run.pk) and entry.actor == operator
    with pytest.raises(services.RunFinished):
        services.cancel_run(run=run, user=operator)


def test_a_queued_run_canceled_ends_at_once_and_its_executor_starts_nothing(demo_cluster, operator):
    run = start_sweep()

    services.cancel_run(run=run, user=operator)
    run = services.execute_run(run=run)

    assert run.status == RunStatus.CANCELED and run.summary == f"canceled by {operator.username} before it started"
    assert not run.rounds.exists() and not run.tests.exists()


def test_the_cool_down_is_waited_inside_the_round_when_nothing_cancels_it(inject):
    inject("gpu004", "degraded_cable", "ens5np0", rate_gbps=200)

    run = services.execute_run(run=start_sweep(cooldown=1.5))

    assert run.status == RunStatus.SUCCEEDED, run.summary
    cooled = run.rounds.get(cooldown_seconds__gt=0)
    assert cooled.job.parameters["cooldown_seconds"] == 1.5
    assert (cooled.job.finished - cooled.job.started).total_seconds() >= 1.5
    assert [suspect.node.hostname for suspect in run.suspects.all()] == ["gpu004"]


def test_cancel_over_the_api_operators_only_and_409_once_ended(demo_cluster, api_client, api_as, viewer, operator):
    run = start_sweep()
    url = f"/api/benchmarks/{run.public_id}/cancel/"
    assert api_client.post(url).status_code in (401, 403)
    assert api_as(viewer).post(url).status_code == 403
    assert not BenchmarkRun.objects.get(pk=run.pk).cancel_requested

    response = api_as(operator).post(url)

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "canceled" and response.json()["canceled_by"] == operator.username
    again = api_as(operator).post(url)
    assert again.status_code == 409 and "already ended" in again.json()["detail"]
    schema = api_as(viewer).get("/api/schema/?format=json").json()
    answers = schema["paths"]["/api/benchmarks/{id}/cancel/"]["post"]["responses"]
    assert {"200", "403", "404", "409"} <= set(answers)


def test_run_page_cancel_button_for_operators_while_active(demo_cluster, browser_as, viewer, operator):
    run = start_sweep()
    page = f"/benchmarks/runs/{run.public_id}/"
    live = f"/benchmarks/runs/{run.public_id}/live/"
    assert 'id="cancel-run"' not in browser_as(viewer).get(page).content.decode()
    assert browser_as(viewer).post(f"/benchmarks/runs/{run.public_id}/cancel/").status_code == 403
    assert 'id="cancel-run"' in browser_as(operator).get(page).content.decode()
    assert 'id="cancel-run"' in browser_as(operator).get(live).content.decode()  # the fragment that reloads

    response = browser_as(operator).post(f"/benchmarks/runs/{run.public_id}/cancel/")

    assert response.status_code == 302 and response["Location"] == page
    assert BenchmarkRun.objects.get(pk=run.pk).status == RunStatus.CANCELED
    assert 'id="cancel-run"' not in browser_as(operator).get(live).content.decode()  # gone once it ended
    again = browser_as(operator).post(f"/benchmarks/runs/{run.public_id}/cancel/", follow=True)
    assert "already ended" in again.content.decode()


def test_ctrl_c_on_the_cli_cancels_the_run_cleanly(inject):
    inject("gpu004", "degraded_cable", "ens5np0", rate_gbps=200)

    def interrupt_when_cooling():
        with thread_connection_returned():
            run = None
            while run is None:
                run = BenchmarkRun.objects.first()
                time.sleep(0.1)
            cooling_round(run)
        os.kill(os.getpid(), signal.SIGINT)

    handler = signal.getsignal(signal.SIGINT)
    interrupter = threading.Thread(target=interrupt_when_cooling)
    interrupter.start()
    started = time.monotonic()
    with pytest.raises(CommandError, match="ended canceled"):
        call_command(
            "benchmark", "run", "nccl-sweep", "--nodes", "rack:r01", "--transport", "sim", "--cooldown", str(COOLDOWN)
        )
    interrupter.join(timeout=5)

    assert time.monotonic() - started < COOLDOWN
    run = BenchmarkRun.objects.get()
    assert run.status == RunStatus.CANCELED and run.summary.startswith("canceled by system")
    assert signal.getsignal(signal.SIGINT) is handler  # the command's own handler is gone
