"""The periodic work is one table: beat's schedule and the embedded server's loop run the same tasks as often."""

import pytest
from django.conf import settings

from portal.celery import app
from portal.embedded import IN_BACKGROUND, REAP, periodic_calls


def test_beat_sends_every_task_of_the_table_as_often_as_the_table_says():
    sent = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    assert sent == {name: float(period) for name, period in settings.RACKPILOT_PERIODIC_TASKS.items()}
    assert "rackpilot-jobs-reap" in settings.CELERY_BEAT_SCHEDULE  # the names beat's database already holds


def test_the_embedded_loop_runs_the_same_tasks_as_often_and_the_due_template_schedules():
    calls = periodic_calls()
    tasks = {call.name: period for call, period in calls if hasattr(call, "name")}
    on_threads = {
        f"{call.__module__}.{call.__name__}": period for call, period in calls[:-1] if not hasattr(call, "name")
    }

    table = settings.RACKPILOT_PERIODIC_TASKS
    assert tasks == {name: period for name, period in table.items() if name != REAP and name not in IN_BACKGROUND}
    assert on_threads == {IN_BACKGROUND[name]: table[name] for name in IN_BACKGROUND}
    assert calls[-1][0].__name__ == "run_due_schedules"


def test_an_entry_added_to_the_table_reaches_the_embedded_loop_routed_to_the_system_queue(settings):
    settings.RACKPILOT_PERIODIC_TASKS = {**settings.RACKPILOT_PERIODIC_TASKS, "rackpilot.jobs.prune": 7}

    assert ("rackpilot.jobs.prune", 7) in [(getattr(call, "name", ""), period) for call, period in periodic_calls()]
    for name in settings.RACKPILOT_PERIODIC_TASKS:
        assert name in app.tasks, name  # a registered task, not a typo
        assert app.amqp.router.route({}, name)["queue"].name == "system", name


@pytest.mark.django_db
def test_each_call_of_the_embedded_loop_runs_here_and_now(monkeypatch):
    ran = []
    monkeypatch.setattr("apps.jobs.services.prune_old_output", lambda: ran.append("prune") or (0, 0))
    monkeypatch.setattr("apps.monitoring.recorder.record_in_background", lambda: ran.append("record on its thread"))

    for call, _ in periodic_calls():
        call()  # in this process, not sent to a queue a busy worker may not reach for hours

    assert ran == ["prune", "record on its thread"]
