"""Hangs and slowdowns of running training jobs, from their progress points (docs/workloads.md, "Hangs and
slowdowns"): a step counter that stopped opens an incident on runbook 1 (NCCL timeout / hang: its log phase names the
lagging ranks and their nodes once the watchdog has printed them), a step time risen past its baseline one on
runbook 2 (GPU utilisation: it finds the GPU or node the others wait for). Once per episode: not while the job has
an active incident, nor again for an episode an incident was already opened for.

The incident names its lagging nodes when it opens (apps/diagnosis/laggards.py: the stored log read, the open health
events of the job's nodes), each with its evidence, before the runbook has read anything: a node that stopped
answering hangs the job long before the watchdog prints a line, and its own log cannot be read."""

import logging
from datetime import datetime

from django.db.models import Q

from apps.diagnosis import laggards, recording, services
from apps.diagnosis.choices import INCIDENT_ACTIVE
from apps.diagnosis.models import Incident
from apps.diagnosis.phases import KIND, UTILISATION_KIND
from apps.health.models import HealthEvent
from apps.inventory.models import Node
from apps.workloads import stalls
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingProgress

logger = logging.getLogger(__name__)
POINTS = 200  # the newest progress points judged per job
RUNBOOK = {"hang": KIND, "slowdown": UTILISATION_KIND}
TITLE = {"hang": "Training hung", "slowdown": "Training slowed down"}


def points_of(job: TrainingJob, *, now: datetime) -> list[stalls.Point]:
    rows = TrainingProgress.objects.filter(job=job, time__lte=now).order_by("-time", "-step")[:POINTS]
    return [stalls.Point(row.step, row.time, row.seconds_per_step) for row in reversed(rows)]


def watch_training(*, now: datetime, transport: str | None = None) -> list[Incident]:
    """Opens (and starts) one incident per hang or slowdown episode of each running training job."""
    opened = []
    # A job whose progress reads fail has stale points, not a hang; unless its node rank 0, where they are read, has
    # stopped answering: then the points stopped with the node, and that is the hang.
    silent = HealthEvent.objects.open().filter(kind=laggards.UNREACHABLE).values("node")
    readable = Q(progress_error="") | Q(members__node_rank=0, members__node__in=silent)
    jobs = TrainingJob.objects.filter(readable, state=TrainingState.RUNNING).exclude(log_path="").distinct()
    for job in jobs.order_by("name"):
        found = stalls.stall(points_of(job, now=now), now=now)
        if found is None:
            continue
        # An open incident is looking at it already; one opened since the episode began has reported it.
        seen = Q(state__in=INCIDENT_ACTIVE) | Q(created__gte=found.since)
        if Incident.objects.filter(training_job=job).filter(seen).exists():
            continue
        try:
            incident = services.open_incident(
                user=None,
                training_job=job,
                title=f"{TITLE[found.kind]}: {job.name}",
                symptom=found.summary,
                transport=transport or "",
                runbook=RUNBOOK[found.kind],
            )
            record_laggards(incident, since=found.since, now=now)
            services.start_runbook(incident=incident, user=None)
        except services.IncidentError as error:
            logger.warning("%s of %s: no incident opened: %s", found.kind, job.name, error)
            continue
        opened.append(incident)
    return opened


def record_laggards(incident: Incident, *, since: datetime, now: datetime) -> list[str]:
    """Put the nodes the job waits for on the incident (its suspects, which the runbook checks) with their evidence."""
    found = laggards.name_laggards(job=incident.training_job, since=since, now=now)
    cited = {seen.hostname: found.log for seen in found.from_log}  # the log's lines are in the stored read
    recording.record_observations(incident=incident, job=None, observations=found.from_log, artifacts=cited, at=now)
    recording.record_observations(incident=incident, job=None, observations=found.from_events, artifacts={}, at=now)
    if found.hosts:
        incident.suspect_nodes.set(Node.objects.filter(hostname__in=found.hosts))
    return found.hosts
