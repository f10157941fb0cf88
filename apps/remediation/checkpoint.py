"""Checkpoint-aware quarantine (docs/health.md, "Checkpoint-aware quarantine"): a quarantine of a node under a
running training job waits for the job's next checkpoint, within a deadline set by the event's severity, then drains
the node and hands the job to whatever resumes it around the node.

The resume is diagnosis' runbook 3 (its checkpoint checks and plan_recovery), a layer above this one: it registers
itself here (`register_resumer`) from its AppConfig.ready(), as the simulator's hooks are filled from above.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction

from apps.health.choices import Severity
from apps.remediation.choices import Outcome
from apps.remediation.models import RemediationDecision
from apps.workloads.choices import TrainingState
from apps.workloads.models import TrainingJob, TrainingProgress

logger = logging.getLogger(__name__)

# How long a quarantine waits for the job's next checkpoint, by the event's severity: a GPU that fell off the bus
# cannot carry the job for long, a minor fault can wait for a save that comes every few hours.
DRAIN_DEADLINES = {
    Severity.CRITICAL: timedelta(minutes=15),
    Severity.MAJOR: timedelta(minutes=60),
    Severity.MINOR: timedelta(hours=4),
    Severity.INFO: timedelta(hours=4),
}

# A job whose newest step is older than this many step times (and at least STALLED_MIN) has stopped stepping.
STALLED_STEPS = 5
STALLED_MIN = timedelta(minutes=5)

Resumer = Callable[..., str]  # resumer(decision=, transport=, queue=) -> a note for the decision's reason
_resumers: list[Resumer] = []


def register_resumer(resumer: Resumer) -> None:
    """A higher layer (diagnosis: runbook 3) resumes a training job around a node drained under it."""
    if resumer not in _resumers:
        _resumers.append(resumer)


def running_job_on(node) -> TrainingJob | None:
    return TrainingJob.objects.filter(state=TrainingState.RUNNING, members__node=node).order_by("pk").first()


def latest_point(job: TrainingJob) -> TrainingProgress | None:
    """The job's newest progress point by time: the step it is at now (after a restart, not the highest)."""
    return TrainingProgress.objects.filter(job=job).order_by("-time", "-step").first()


def defer(decision: RemediationDecision) -> bool:
    """Turns a quarantine of a node under a running training job into a wait for the job's next checkpoint (the
    decision is `deferred`, with its deadline, or `refused` when an earlier one waits for the node already); False
    when it drains at once (no such job, or the job keeps no checkpoints, which the reason then says)."""
    node, event = decision.node, decision.event
    job = running_job_on(node)
    if job is None:
        return False
    point = latest_point(job)
    decision.training_job = job
    decision.decided_step = point.step if point else None
    decision.gpus = job.world_size
    if not job.checkpoint_dir:
        decision.reason = (
            f"{decision.reason} ({job.name} runs on {node.hostname} with no checkpoints configured: drained at once)"
        )[:500]
        return False
    deadline = DRAIN_DEADLINES.get(event.severity, DRAIN_DEADLINES[Severity.MINOR])
    pointless = why_not_wait(job, point, now=decision.decided_at, deadline=deadline)
    if pointless:
        decision.reason = f"{decision.reason} ({job.name} runs on {node.hostname}; drained at once: {pointless})"[:500]
        return False
    waiting = waiting_for_checkpoint().filter(node=node).exclude(pk=decision.pk).first()
    if waiting is not None:  # one drain and one resume per node: the first decision's
        decision.outcome = Outcome.REFUSED
        decision.reason = f"{node.hostname} is drained at {job.name}'s next checkpoint already ({waiting.kind})."
        return True
    decision.outcome = Outcome.DEFERRED
    decision.drain_by = decision.decided_at + deadline
    decision.checkpoint_before = job.last_checkpoint_step
    after = f"after step {job.last_checkpoint_step}" if job.last_checkpoint_step is not None else "its first"
    decision.reason = (
        f"Deferred: drain {node.hostname} at {job.name}'s next checkpoint ({after}), by "
        f"{decision.drain_by.isoformat(timespec='minutes')} at the latest ({event.severity}): {event.summary}"
    )[:500]
    return True


def why_not_wait(job: TrainingJob, point: TrainingProgress | None, *, now: datetime, deadline: timedelta) -> str:
    """Why waiting for the job's next checkpoint cannot pay ("" when it can): the job has stopped stepping (a fault
    that crashed it: nothing more to save), or its next save is due after the deadline (waiting would lose the
    steps until the deadline on top of those since the last save)."""
    if point is None or not point.seconds_per_step:
        return ""  # no step time to judge by yet: wait, bounded by the deadline
    stalled_after = max(STALLED_STEPS * point.seconds_per_step, STALLED_MIN.total_seconds())
    quiet = (now - point.time).total_seconds()
    if quiet > stalled_after:
        return f"it has logged no step for {quiet / 60:.0f} min (step {point.step}), so no checkpoint is coming"
    interval = job.checkpoint_interval_steps
    if not interval:
        return ""
    saved = job.last_checkpoint_step
    since_save = point.step - saved if saved is not None else point.step % interval
    due_in = max(0.0, (interval - since_save % interval) * point.seconds_per_step - quiet)
    if due_in > deadline.total_seconds():
        return (
            f"its next checkpoint is due in about {due_in / 60:.0f} min, after the {deadline.total_seconds() / 60:.0f}"
            "-minute deadline"
        )
    return ""


def due(decision: RemediationDecision, *, now: datetime) -> str:
    """Why the deferred drain happens now ("" while it waits): the job saved a checkpoint since the decision, the
    deadline passed, or the job no longer runs on the node (nothing left to wait for)."""
    job = TrainingJob.objects.filter(pk=decision.training_job_id).first()
    if job is None or job.state != TrainingState.RUNNING or not job.members.filter(node=decision.node_id).exists():
        return "the training job no longer runs on it"
    if job.last_checkpoint_step is not None and job.last_checkpoint_step != decision.checkpoint_before:
        return f"{job.name} saved its checkpoint of step {job.last_checkpoint_step}"
    if decision.drain_by is not None and now >= decision.drain_by:
        return f"deadline reached with no new checkpoint of {job.name} (the newest: {job.last_checkpoint_step})"
    return ""


def waiting_for_checkpoint():
    """The deferred quarantines waiting for a checkpoint (those deferred into a maintenance window have `act_at`)."""
    return RemediationDecision.objects.filter(outcome=Outcome.DEFERRED, act_at__isnull=True)


def settle(*, now: datetime, act: Callable[[RemediationDecision], None], transport=None, queue=True) -> list:
    """Drains each deferred quarantine that is due (`act`: the quarantine's own drain and scheduler job), records
    where the job stood, and hands the job to the resumers. Returns the decisions drained (or failed)."""
    settled = []
    for pk in waiting_for_checkpoint().order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            decision = (
                RemediationDecision.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("event", "node", "policy", "training_job")
                .filter(pk=pk, outcome=Outcome.DEFERRED, act_at__isnull=True)
                .first()
            )
            if decision is None:
                continue  # another evaluator has it, or drained it
            why = due(decision, now=now)
            if not why:
                continue
            _drain(decision, why=why, now=now, act=act)
            if decision.outcome == Outcome.ACTED and decision.training_job is not None:
                _resume(decision, transport=transport, queue=queue)
            settled.append(decision)
    return settled


def _drain(decision: RemediationDecision, *, why: str, now: datetime, act) -> None:
    job = decision.training_job
    point = latest_point(job) if job is not None else None
    decision.drained_at = now
    decision.drained_step = point.step if point else None
    decision.seconds_per_step = point.seconds_per_step if point else None
    if job is not None and job.last_checkpoint_step is not None:
        # The newest save the log shows; the resume's checks may fall back to an older valid one (and say so).
        decision.checkpoint_step = job.last_checkpoint_step
        if decision.drained_step is not None and decision.drained_step >= job.last_checkpoint_step:
            decision.steps_lost = decision.drained_step - job.last_checkpoint_step
    decision.outcome = Outcome.ACTED
    decision.reason = f"Drained {decision.node.hostname}: {why}. {decision.reason}"[:500]
    act(decision)  # saves: ACTED with its job, or FAILED with why


def _resume(decision: RemediationDecision, *, transport, queue) -> None:
    if not _resumers:
        note = "nothing resumes the training job here: a person relaunches it from its checkpoint"
    else:
        notes = [resumer(decision=decision, transport=transport, queue=queue) for resumer in _resumers]
        note = "; ".join(note for note in notes if note)
    if note:
        decision.reason = f"{decision.reason}; {note}"[:500]
    decision.save()
