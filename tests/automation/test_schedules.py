"""Schedules: kept in django-celery-beat's tables (crontab or interval), enabled and disabled, and each tick runs its
template once even when two beats (two concurrent tick calls) send it."""

import datetime as dt
import threading
from zoneinfo import ZoneInfo

import pytest
from django.db import close_old_connections
from django.urls import reverse
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from apps.automation import services, timing
from apps.automation.choices import RunStatus
from apps.automation.models import JobTemplate, Schedule, TemplateRun
from apps.core.models import AuditEntry
from apps.jobs.models import Job
from portal.celery import app

URL = "/api/schedules/"
UTC = ZoneInfo("UTC")


@pytest.fixture
def template(rack_of_nodes, operator):
    return services.save_template(
        user=operator, name="nightly sleep", kind="sleep", parameters={"seconds": 0}, targets={"racks": ["r04"]}
    )


def _nightly(template, operator, **fields):
    return services.save_schedule(
        user=operator, name="nightly", template=template, timing="crontab", minute="0", hour="2", **fields
    )


@pytest.mark.django_db
def test_a_schedule_is_a_periodic_task_beat_reads_from_the_database(api_as, operator, template):
    answer = api_as(operator).post(
        URL, {"name": "nightly", "template": "nightly sleep", "minute": "0", "hour": "2"}, format="json"
    )
    assert answer.status_code == 201, answer.content
    schedule = Schedule.objects.get(name="nightly")
    task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert task.task == "rackpilot.automation.run_schedule" and task.args == f'["{schedule.public_id}"]'
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("0", "2", "*") and task.enabled
    assert answer.json()["next_run"].endswith("02:00:00Z")
    assert AuditEntry.objects.filter(object_type="automation.schedule", action="create", actor=operator).exists()

    entry = ModelEntry(task, app=app)  # what beat's DatabaseScheduler sends
    assert entry.task == "rackpilot.automation.run_schedule" and entry.args == [str(schedule.public_id)]
    assert entry.schedule.hour == {2} and entry.schedule.minute == {0}

    off = api_as(operator).patch(f"{URL}{schedule.public_id}/", {"enabled": False}, format="json")
    assert off.status_code == 200 and off.json()["next_run"] is None
    task.refresh_from_db()
    assert not task.enabled and task.name not in DatabaseScheduler(app=app, lazy=True).all_as_schedule()
    assert not PeriodicTask.objects.enabled().filter(pk=task.pk).exists()
    every = api_as(operator).patch(
        f"{URL}{schedule.public_id}/", {"timing": "interval", "every_minutes": 30, "enabled": True}, format="json"
    )
    task.refresh_from_db()
    assert every.status_code == 200 and task.crontab is None and task.interval.every == 30 and task.enabled

    assert api_as(operator).delete(f"{URL}{schedule.public_id}/").status_code == 204
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()


@pytest.mark.django_db
def test_bad_timing_is_refused_naming_the_field(api_as, operator, viewer, template):
    client = api_as(operator)
    minute = client.post(URL, {"name": "x", "template": "nightly sleep", "minute": "99"}, format="json")
    assert minute.status_code == 400 and "minute" in minute.json()
    interval = client.post(URL, {"name": "x", "template": "nightly sleep", "timing": "interval"}, format="json")
    assert interval.status_code == 400 and "every_minutes" in interval.json()
    never = client.post(
        URL, {"name": "x", "template": "nightly sleep", "day_of_month": "31", "month_of_year": "2"}, format="json"
    )
    assert never.status_code == 400
    missing = client.post(URL, {"name": "x", "template": "no such"}, format="json")
    assert missing.status_code == 400 and "template" in missing.json()
    assert api_as(viewer).post(URL, {"name": "x", "template": "nightly sleep"}, format="json").status_code == 403
    assert not Schedule.objects.exists() and not PeriodicTask.objects.filter(task__startswith="rackpilot.automation")


@pytest.mark.django_db
def test_every_bad_field_of_a_schedule_is_named_at_once(api_as, browser_as, operator, template):
    """Fields refused by their shape (a name too long, a template of no such name, an interval of 0) no longer hide
    what the schedule's checks say of the others (crontab fields cron refuses, a name taken); nothing is saved."""
    client = api_as(operator)
    body = {"name": "n" * 101, "template": "nightly sleep", "minute": "99", "hour": "25"}
    answer = client.post(URL, body, format="json")
    assert answer.status_code == 400 and set(answer.json()) == {"name", "minute", "hour"}, answer.json()
    answer = client.post(URL, {"name": "x", "template": "no such", "day_of_week": "funday"}, format="json")
    assert answer.status_code == 400 and set(answer.json()) == {"template", "day_of_week"}, answer.json()
    existing = _nightly(template, operator)
    taken = {"name": "nightly", "template": "no such", "timing": "interval", "every_minutes": 0}
    answer = client.post(URL, taken, format="json")
    assert answer.status_code == 400 and set(answer.json()) == {"name", "template", "every_minutes"}, answer.json()
    assert "exists" in str(answer.json()["name"])
    patched = client.patch(f"{URL}{existing.public_id}/", {"name": "", "minute": "61"}, format="json")
    assert patched.status_code == 400 and set(patched.json()) == {"name", "minute"}, patched.json()

    form = {"name": "n" * 101, "template": template.public_id, "timing": "crontab", "minute": "99", "hour": "2"}
    form |= {"day_of_month": "*", "month_of_year": "*", "day_of_week": "funday"}
    shown = browser_as(operator).post(reverse("automation-schedule-new"), form)
    assert shown.status_code == 400
    assert set(shown.context["form"].errors) == {"name", "minute", "day_of_week"}, shown.context["form"].errors
    assert list(Schedule.objects.values_list("name", "minute")) == [("nightly", "0")]


@pytest.mark.django_db
def test_a_tick_runs_once_and_the_next_tick_runs_again(operator, template):
    schedule = _nightly(template, operator)
    first = dt.datetime(2030, 1, 2, 2, 0, 1, tzinfo=UTC)
    run = services.run_schedule_tick(schedule_id=str(schedule.public_id), now=first)
    assert run.status == RunStatus.STARTED and run.tick == first.replace(second=0)
    assert run.job.kind == "sleep" and run.job.requested_by is None and run.job.node_count == 3
    # the same tick sent again a few seconds later (a second beat, a redelivered message): nothing more
    again = first + dt.timedelta(seconds=4)
    assert services.run_schedule_tick(schedule_id=str(schedule.public_id), now=again) is None
    assert Job.objects.count() == 1
    nextday = services.run_schedule_tick(schedule_id=str(schedule.public_id), now=first + dt.timedelta(days=1))
    assert nextday.tick == dt.datetime(2030, 1, 3, 2, 0, tzinfo=UTC) and Job.objects.count() == 2
    assert AuditEntry.objects.filter(object_type="automation.schedule", action="start").count() == 2


@pytest.mark.django_db
def test_an_interval_claims_each_tick_once_even_out_of_phase(operator, template):
    schedule = services.save_schedule(
        user=operator, name="every 10", template=template, timing="interval", every_minutes=10
    )
    base = schedule.created + dt.timedelta(minutes=10)
    assert services.run_schedule_tick(schedule_id=str(schedule.public_id), now=base + dt.timedelta(seconds=2))
    for late in (3, 50, 240):  # a second beat out of phase, up to 4 of the 10 minutes behind
        sent = base + dt.timedelta(seconds=late)
        assert services.run_schedule_tick(schedule_id=str(schedule.public_id), now=sent) is None
    assert services.run_schedule_tick(schedule_id=str(schedule.public_id), now=base + dt.timedelta(minutes=10))
    assert Job.objects.count() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.wirings  # four threads claim at once: SQLite's one writer or PostgreSQL's row locks
def test_two_concurrent_ticks_start_one_job(operator, template):
    schedule = _nightly(template, operator)
    now = dt.datetime(2030, 1, 2, 2, 0, 3, tzinfo=UTC)
    barrier, results = threading.Barrier(4), []

    def beat():
        try:
            barrier.wait()
            results.append(services.run_schedule_tick(schedule_id=str(schedule.public_id), now=now))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=beat) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 4
    assert sum(run is not None for run in results) == 1
    assert Job.objects.count() == 1 and TemplateRun.objects.filter(schedule=schedule).count() == 1


@pytest.mark.django_db
def test_only_idle_leaves_out_busy_nodes_and_skips_when_none_are_idle(operator, template, rack_of_nodes):
    from apps.jobs import services as jobs

    JobTemplate.objects.filter(pk=template.pk).update(only_idle=True)
    template.refresh_from_db()
    busy = jobs.create_job(kind="sleep", targets=jobs.TargetSpec(nodes=("gpu001",)), transport="sim")
    schedule = _nightly(template, operator)
    run = services.run_schedule_tick(schedule_id=str(schedule.public_id), now=dt.datetime(2030, 1, 2, 2, tzinfo=UTC))
    assert sorted(run.job.nodes.values_list("hostname", flat=True)) == ["gpu002", "gpu003"]
    jobs.create_job(kind="sleep", targets=jobs.TargetSpec(nodes=("gpu002", "gpu003")), transport="sim")
    skipped = services.run_schedule_tick(
        schedule_id=str(schedule.public_id), now=dt.datetime(2030, 1, 3, 2, tzinfo=UTC)
    )
    assert skipped.status == RunStatus.SKIPPED and skipped.job is None and "busy" in skipped.message
    assert busy.pk


@pytest.mark.django_db
@pytest.mark.wirings  # the embedded wiring's own loop
def test_the_embedded_loop_runs_due_ticks_once(operator, template):
    schedule = services.save_schedule(
        user=operator, name="every 5", template=template, timing="interval", every_minutes=5
    )
    assert services.run_due_schedules(now=schedule.created + dt.timedelta(minutes=2)) == 0
    later = schedule.created + dt.timedelta(minutes=5, seconds=1)
    assert services.run_due_schedules(now=later) == 1
    assert services.run_due_schedules(now=later + dt.timedelta(seconds=5)) == 0
    assert Job.objects.count() == 1


def test_crontab_ticks_fall_where_cron_says():
    probe = Schedule(
        timing="crontab",
        minute="30",
        hour="*/6",
        day_of_month="*",
        month_of_year="*",
        day_of_week="sat",
        created=dt.datetime(2030, 1, 1, tzinfo=UTC),
    )
    saturday = dt.datetime(2030, 1, 5, 13, 0, tzinfo=UTC)  # 5 January 2030 is a Saturday
    assert timing.tick_for(probe, saturday) == dt.datetime(2030, 1, 5, 12, 30, tzinfo=UTC)
    assert timing.next_run(probe, saturday) == dt.datetime(2030, 1, 5, 18, 30, tzinfo=UTC)
    assert timing.next_run(probe, dt.datetime(2030, 1, 5, 19, tzinfo=UTC)) == dt.datetime(
        2030, 1, 12, 0, 30, tzinfo=UTC
    )


@pytest.mark.django_db
def test_pages_list_toggle_and_show_the_jobs_a_schedule_started(browser_as, viewer, operator, template):
    schedule = _nightly(template, operator)
    services.run_schedule_tick(schedule_id=str(schedule.public_id), now=dt.datetime(2030, 1, 2, 2, tzinfo=UTC))
    page = browser_as(operator)
    listing = page.get(reverse("automation-schedules")).content.decode()
    assert "nightly" in listing and "cron 0 2 * * *" in listing and "Disable" in listing
    detail = page.get(reverse("automation-schedule", args=[schedule.public_id])).content.decode()
    job = Job.objects.get()
    assert reverse("job-page", args=[job.public_id]) in detail and 'id="next-run"' in detail
    assert page.post(reverse("automation-schedule-toggle", args=[schedule.public_id])).status_code == 302
    schedule.refresh_from_db()
    assert not schedule.enabled and not PeriodicTask.objects.get(pk=schedule.periodic_task_id).enabled
    assert AuditEntry.objects.filter(object_type="automation.schedule", action="update", actor=operator).exists()
    made = page.post(
        reverse("automation-schedule-new"),
        {
            "name": "weekly",
            "template": template.public_id,
            "timing": "crontab",
            "minute": "0",
            "hour": "3",
            "day_of_month": "*",
            "month_of_year": "*",
            "day_of_week": "6",
            "enabled": "on",
        },
    )
    assert made.status_code == 302 and Schedule.objects.filter(name="weekly", day_of_week="6").exists()
    watcher = browser_as(viewer)
    assert "Enable</button>" not in watcher.get(reverse("automation-schedules")).content.decode()
    assert watcher.post(reverse("automation-schedule-toggle", args=[schedule.public_id])).status_code == 403
