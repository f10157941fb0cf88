"""Hangs and slowdowns of a running training job open one incident each on the runbook that fits
(apps/diagnosis/training_watch.py), from its progress points; a healthy job opens none. The clock is the test's
(`clock`), passed in."""

import datetime as dt

import pytest

from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.diagnosis.training_watch import watch_training
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingProgress

pytestmark = pytest.mark.django_db


def steps(job, *, until: dt.datetime, count: int = 40, slow_from: int | None = None) -> None:
    """Step lines every 10 steps of 1.6 s up to `until`; from the `slow_from`-th line on, 2.4 s a step."""
    rows, at = [], until
    for i in reversed(range(count)):
        slow = slow_from is not None and i >= slow_from
        rows.append(TrainingProgress(job=job, step=1000 + 10 * i, time=at, seconds_per_step=2.4 if slow else 1.6))
        at -= dt.timedelta(seconds=24 if slow else 16)
    TrainingProgress.objects.bulk_create(rows)


def test_a_healthy_job_opens_nothing(training_job, clock):
    now = clock.now
    steps(training_job, until=now - dt.timedelta(seconds=20))
    assert watch_training(now=now, transport="sim") == []
    assert not Incident.objects.exists()


def test_a_hang_opens_one_incident_on_the_nccl_timeout_runbook_once_per_episode(training_job, clock):
    now = clock.now
    steps(training_job, until=now - dt.timedelta(minutes=6))
    (incident,) = watch_training(now=now, transport="sim")
    assert incident.runbook == "nccl-timeout" and incident.training_job == training_job
    assert incident.title == "Training hung: llm-pretrain" and incident.opened_by is None
    assert incident.symptom.startswith("No step since step 1390")
    assert incident.jobs.get().parameters["phase"] == Phase.LOG  # its runbook started: the log names the laggards
    # A minute later, still hung: the same episode, no second incident.
    assert watch_training(now=now + dt.timedelta(minutes=1), transport="sim") == []
    # Resolved, but still the same episode (nothing moved since): still one.
    Incident.objects.update(state="resolved")
    assert watch_training(now=now + dt.timedelta(minutes=2), transport="sim") == []
    assert Incident.objects.count() == 1


def test_a_slowdown_opens_an_incident_on_the_utilisation_runbook(training_job, clock):
    now = clock.now
    steps(training_job, until=now - dt.timedelta(seconds=10), slow_from=30)
    (incident,) = watch_training(now=now, transport="sim")
    assert incident.runbook == "gpu-utilisation" and incident.title == "Training slowed down: llm-pretrain"
    assert "50 % above the baseline 1.60 s" in incident.symptom
    assert watch_training(now=now + dt.timedelta(minutes=1), transport="sim") == []


def test_stale_points_of_a_job_whose_reads_fail_or_that_stopped_are_not_a_hang(training_job, clock):
    now = clock.now
    steps(training_job, until=now - dt.timedelta(minutes=30))
    training_job.progress_error = "gpu001: tail: cannot open"
    training_job.save()
    assert watch_training(now=now, transport="sim") == []
    training_job.progress_error, training_job.state = "", TrainingState.COMPLETED
    training_job.save()
    assert watch_training(now=now, transport="sim") == []
    assert not Incident.objects.exists()


def test_the_watch_is_one_of_the_periodic_tasks(settings):
    assert settings.RACKPILOT_PERIODIC_TASKS["rackpilot.diagnosis.watch_training"] == 60
