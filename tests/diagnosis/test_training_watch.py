"""Hangs and slowdowns of a running training job open one incident each on the runbook that fits
(apps/diagnosis/training_watch.py), from its progress points; a healthy job opens none. The clock is the test's
(`clock`), passed in."""

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.diagnosis import laggards
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import Phase
from apps.diagnosis.simulation import training_run
from apps.diagnosis.training_watch import watch_training
from apps.health import services as health
from apps.health.choices import Severity, Source
from apps.inventory.models import Node
from apps.jobs.models import Artifact, compress
from apps.jobs.services import TargetSpec, create_job
from apps.parsers.training_log import parse_progress
from apps.simulator.training import TrainingRun, render_log, simulate
from apps.simulator.training_faults import disruptions
from apps.workloads import services as workloads
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


# --- the lagging nodes, named when the incident opens ---------------------------------------------------------------


def simulated(training_job, *, now: dt.datetime) -> TrainingRun:
    """The job as the simulator runs it, its step lines up to `now` stored as its progress (node rank 0's log)."""
    run = training_run(training_job)
    log = render_log(run, run.hosts[0], disruptions(run), now.timestamp())
    workloads.record_progress(job=training_job, points=parse_progress(log, now=now))
    return run


def stored_read(training_job, text: str, *, at: dt.datetime) -> Artifact:
    """A `training-progress` read of the job's log on node rank 0 that kept `text` as its output at `at`."""
    read = create_job(
        kind=laggards.PROGRESS_READ,
        targets=TargetSpec(nodes=(str(training_job.members.get(node_rank=0).node.public_id),)),
        parameters={"training_job": str(training_job.public_id)},
    )
    data = text.encode()
    artifact = Artifact.objects.create(
        step=read.steps.get(), stream="stdout", content=compress(data), size_bytes=len(data), stored_bytes=len(data),
        cap_bytes=1 << 20,
    )  # fmt: skip
    Artifact.objects.filter(pk=artifact.pk).update(created=at)
    return artifact


def test_a_hung_node_that_stopped_answering_is_named_at_once_with_its_event(training_job, inject, browser_as, viewer):
    now = timezone.now()
    inject("gpu003", "node_hang", minutes_ago=7)  # the watchdog fires at 10 min: the log names no one yet
    simulated(training_job, now=now)
    health.record_event(
        component=Node.objects.get(hostname="gpu003"),
        source=Source.KERNEL_LOG,
        kind="node_unreachable",
        severity=Severity.CRITICAL,
        summary="gpu003: does not answer over SSH (the connection timed out)",
        evidence={"error": "ssh: connect to host gpu003 port 22: Connection timed out"},
        at=now - dt.timedelta(minutes=4),
    )
    health.record_event(  # an old minor one elsewhere names no one
        component=Node.objects.get(hostname="gpu002"),
        source=Source.KERNEL_LOG,
        kind="fan_degraded",
        severity=Severity.MINOR,
        summary="gpu002: fan 3 slow",
        at=now - dt.timedelta(minutes=30),
    )

    (incident,) = watch_training(now=now, transport="sim")

    assert incident.title == "Training hung: llm-pretrain"
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu003"]
    (row,) = incident.evidence.all()
    assert (row.hostname, row.topic, row.subject, row.verdict) == ("gpu003", "health", "node_unreachable", "fault")
    assert row.excerpt == "ssh: connect to host gpu003 port 22: Connection timed out"
    assert row.observed_at == now and row.job is None
    page = browser_as(viewer).get(reverse("incident-detail", args=[incident.public_id])).content.decode()
    assert re.search(r'id="suspect-nodes"><a href="[^"]+">gpu003</a></span>', page)
    assert "node_unreachable" in page and "does not answer over SSH" in page
    # the runbook goes on from them even when the log names no one (a hung node's own log cannot be read)
    assert incident.jobs.get().parameters["phase"] == Phase.LOG


def test_the_stored_log_names_the_ranks_that_lag_and_their_node(training_job, inject):
    now = timezone.now()
    inject("gpu003", "nic_down", "ens3np0", minutes_ago=12)  # the watchdog fired two minutes ago
    run = simulated(training_job, now=now)
    # one output file for every node, as `srun --output` writes it: every rank's watchdog line
    timeline = simulate(run, disruptions(run), now.timestamp())
    text = "".join(
        line.text + "\n" for line in sorted(timeline.lines, key=lambda line: line.at) if line.at <= now.timestamp()
    )
    read = stored_read(training_job, text, at=now - dt.timedelta(minutes=1))

    (incident,) = watch_training(now=now, transport="sim")

    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu003"]
    lag = incident.evidence.get(topic="lag")
    assert lag.data["ranks"] == list(range(16, 24)) and lag.data["hosts"] == ["gpu003"]
    assert "ranks 16-23 enqueued NCCL work up to" in lag.summary
    assert lag.artifact == read  # the raw output it stands on
    watchdog = incident.evidence.get(topic="watchdog")
    assert "Watchdog caught collective operation timeout" in watchdog.excerpt


def test_a_desync_report_in_the_stored_log_names_the_ranks_that_never_joined(training_job):
    now = timezone.now()
    simulated(training_job, now=now - dt.timedelta(minutes=8))  # stopped stepping 8 minutes ago
    stored_read(
        training_job,
        "[rank0]:[E1201 06:24:44.903881913 ProcessGroupNCCL.cpp:1582] [PG 0 Rank 0] Timeout at NCCL work: 9, "
        "last enqueued NCCL work: 9, last completed NCCL work: 8.\n"
        "\t - [0] Timeout at collective: ALLREDUCE, #9\n"
        "\t - To our best knowledge, ranks [24, 25] are the lagging ranks that caused this timeout. They never "
        "joined any collectives\n",
        at=now - dt.timedelta(minutes=1),
    )

    (incident,) = watch_training(now=now, transport="sim")

    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu004"]
    lag = incident.evidence.get(topic="lag")
    assert lag.data == {"ranks": [24, 25], "hosts": ["gpu004"], "lines": [2, 3]}
    assert "never joined any collective" in lag.summary


def test_a_clean_log_and_healthy_nodes_name_no_one(training_job):
    now = timezone.now()
    simulated(training_job, now=now - dt.timedelta(minutes=8))
    stored_read(training_job, " [2026-12-01 06:24:44] iteration     1200/  500000 | lm loss: 2.3E+00 |\n", at=now)
    (incident,) = watch_training(now=now, transport="sim")
    assert not incident.suspect_nodes.exists() and not incident.evidence.exists()


def test_a_job_whose_reads_fail_because_its_node_rank_0_hung_is_a_hang_on_that_node(training_job, inject):
    now = timezone.now()
    inject("gpu001", "node_hang", minutes_ago=8)
    simulated(training_job, now=now)
    training_job.progress_error = "gpu001: ssh: connect to host gpu001 port 22: Connection timed out"
    training_job.save()
    assert watch_training(now=now, transport="sim") == []  # reads that fail alone: stale points, not a hang

    health.record_event(
        component=Node.objects.get(hostname="gpu001"),
        source=Source.KERNEL_LOG,
        kind="node_unreachable",
        severity=Severity.CRITICAL,
        summary="gpu001: does not answer over SSH (the connection timed out)",
        at=now - dt.timedelta(minutes=3),
    )
    (incident,) = watch_training(now=now, transport="sim")

    assert incident.symptom.startswith("No step since step")
    assert list(incident.suspect_nodes.values_list("hostname", flat=True)) == ["gpu001"]
