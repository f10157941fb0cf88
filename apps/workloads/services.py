"""Workload services: a training job's nodes in node-rank order, its progress series, and the queries pages and the
API share."""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from apps.inventory.models import Node
from apps.parsers.training_log import CheckpointSave, ProgressPoint
from apps.workloads.models import InferenceService, TrainingJob, TrainingJobNode, TrainingProgress

PROGRESS_FIGURES = ("loss", "samples_per_second", "seconds_per_step", "learning_rate")


def set_training_nodes(*, job: TrainingJob, nodes: list[Node]) -> None:
    """Give the job these nodes, node rank by node rank (the first node is rank 0, as torchrun's --node-rank)."""
    if len({node.pk for node in nodes}) != len(nodes):
        raise ValueError("a node appears twice; each node holds one place in a job")
    with transaction.atomic():
        job.members.all().delete()
        TrainingJobNode.objects.bulk_create(
            [TrainingJobNode(job=job, node=node, node_rank=rank) for rank, node in enumerate(nodes)]
        )


def move_training_job(*, job: TrainingJob, nodes: list[Node], reason: str) -> None:
    """Run the job on these nodes from now on (a recovery that excluded a bad node), keeping the earlier node list
    in its placements (the simulator replays the run's history on the nodes it ran on then)."""
    before = [member.node.hostname for member in job.members.select_related("node").order_by("node_rank")]
    if before == [node.hostname for node in nodes]:
        return
    with transaction.atomic():
        job.placements = [*job.placements, {"hosts": before, "until": timezone.now().isoformat(), "reason": reason}]
        job.save(update_fields=["placements", "updated"])
        set_training_nodes(job=job, nodes=nodes)


def training_jobs():
    return TrainingJob.objects.select_related("checkpoint_tier").prefetch_related("members__node")


def inference_services():
    return InferenceService.objects.prefetch_related("nodes")


def workloads_on(*, node: Node) -> dict:
    """What runs on a node: its training jobs and inference services (all states)."""
    return {
        "training_jobs": list(TrainingJob.objects.filter(members__node=node).distinct()),
        "inference_services": list(InferenceService.objects.filter(nodes=node).distinct()),
    }


def record_progress(*, job: TrainingJob, points: Iterable[ProgressPoint]) -> int:
    """Store the step lines read from the job's log (a step seen again, after a restart, takes the newer line's
    figures). Points without a time are left out: a series point needs one. Returns how many were written."""
    rows = {
        point.step: TrainingProgress(
            job=job, step=point.step, time=point.at, **{name: getattr(point, name) for name in PROGRESS_FIGURES}
        )
        for point in points
        if point.at is not None
    }
    if rows:
        TrainingProgress.objects.bulk_create(
            rows.values(),
            update_conflicts=True,
            unique_fields=["job", "step"],
            update_fields=["time", *PROGRESS_FIGURES],
        )
    return len(rows)


def note_progress_read(*, job: TrainingJob, error: str = "") -> bool:
    """What the last read of the job's log came to: `error` says why it failed, blank that it worked. Written only
    when it changes (a read every minute failing the same way is said once, not every minute), and as derived state,
    outside the audit log, like the progress points. Returns whether it changed."""
    error = error.strip()[:300]
    if job.progress_error == error:
        return False
    job.progress_error, job.progress_error_at = error, timezone.now() if error else None
    TrainingJob.objects.filter(pk=job.pk).update(progress_error=error, progress_error_at=job.progress_error_at)
    return True


def note_checkpoints(*, job: TrainingJob, saves: Iterable[CheckpointSave]) -> bool:
    """The newest checkpoint save the log shows, kept on the job when it changes (derived state, outside the audit
    log, like the progress points). A run resumed from an older checkpoint saves lower steps again: the newest line
    of the log wins, not the highest step. Returns whether it changed."""
    saves = list(saves)
    newest = saves[-1] if saves else None  # the last one written
    if newest is None or (job.last_checkpoint_step, job.last_checkpoint_path) == (newest.step, newest.path):
        return False
    job.last_checkpoint_step, job.last_checkpoint_path = newest.step, newest.path[:255]
    TrainingJob.objects.filter(pk=job.pk).update(
        last_checkpoint_step=job.last_checkpoint_step, last_checkpoint_path=job.last_checkpoint_path
    )
    return True


def progress_series(*, job: TrainingJob, limit: int = 5000) -> list[TrainingProgress]:
    """The job's newest `limit` progress points, in the order they were written."""
    newest = list(TrainingProgress.objects.filter(job=job).order_by("-time", "-step")[:limit])
    return newest[::-1]


def latest_progress(*, jobs) -> dict[int, TrainingProgress]:
    """Each of these jobs' newest progress point by time, by job id (jobs with none are absent): after a restart
    from an older checkpoint that is the step the run is at now, not the highest step it ever reached."""
    newest = TrainingProgress.objects.filter(job=OuterRef("job")).order_by("-time", "-step").values("step")[:1]
    return {point.job_id: point for point in TrainingProgress.objects.filter(job__in=jobs, step=Subquery(newest))}
