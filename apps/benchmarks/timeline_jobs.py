"""Timeline analyses run as a job: large uploads, and every profile of a training job (60–150 s for a large job).

The request checks what it can, records a Job (kind `timeline-analysis`, no nodes, no shards, as the inventory
import is: apps.jobs.imports) and answers 202 with it. A worker reads each file or rank's trace (bounded as any
upload: apps.benchmarks.timelines), writes progress events, stores the analysis (linked to the job) and ends the
job. A refused file ends it FAILED with the reason, naming the file; nothing is stored then. Small uploads stay in
the request."""

import io
import logging
import traceback

from celery import current_app
from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from apps.benchmarks import timelines
from apps.benchmarks.choices import TIMELINE_MAX_FILES, TimelineOrigin
from apps.benchmarks.models import TraceUpload
from apps.core.forms import flat_messages
from apps.core.text import counted
from apps.jobs.choices import EventLevel, JobStatus
from apps.jobs.events import broadcast, emit
from apps.jobs.models import Job
from apps.workloads.models import TrainingJob

logger = logging.getLogger(__name__)

KIND = "timeline-analysis"
TASK = "rackpilot.benchmarks.analyse_timeline"
BACKGROUND_FROM_BYTES = 8 * 2**20  # uploads this large (all files together) are analysed by a worker
PROGRESS_EVERY_PERCENT = 5  # a profile of thousands of ranks writes ~20 progress events, not one per rank


def is_large(files: list) -> bool:
    return sum(getattr(upload, "size", 0) or 0 for _, upload in files) >= BACKGROUND_FROM_BYTES


def start_analysis(*, files: list, name: str = "", requested_by=None) -> Job:
    """Store the files and record the job; its task is queued once committed (task id = the job's public id)."""
    if not files:
        raise serializers.ValidationError({"files": ["Upload at least one trace (.json or .json.gz)."]})
    if len(files) > TIMELINE_MAX_FILES:
        raise serializers.ValidationError({"files": [f"At most {TIMELINE_MAX_FILES} files (one trace per rank)."]})
    who = requested_by if getattr(requested_by, "is_authenticated", False) else None
    with transaction.atomic():
        job = Job.objects.create(
            kind=KIND,
            parameters={"name": name, "files": [filename for filename, _ in files]},
            transport="",
            requested_by=who,
            shard_count=0,
        )
        for position, (filename, upload) in enumerate(files):
            upload.seek(0)
            TraceUpload.objects.create(job=job, position=position, name=filename or "trace", content=upload.read())
        _queue(job, f"timeline analysis of {counted(len(files), 'file')} queued, requested by {_name(who)}")
    return job


def start_profile(*, training_job: TrainingJob, steps: int, requested_by=None) -> Job:
    """Check the profile (timelines.check_profile: a ValidationError naming the field, nothing recorded) and record
    the job that models and reads each rank's trace; its task is queued once committed."""
    timelines.check_profile(training_job=training_job, steps=steps)
    who = requested_by if getattr(requested_by, "is_authenticated", False) else None
    with transaction.atomic():
        job = Job.objects.create(
            kind=KIND,
            parameters={
                "training_job": str(training_job.public_id),
                "training_job_name": training_job.name,  # the job list names it (as training-progress reads do)
                "steps": steps,
            },
            transport="sim",
            requested_by=who,
            shard_count=0,
        )
        _queue(job, f"profile of {training_job.name} ({counted(steps, 'step')}) queued, requested by {_name(who)}")
    return job


def _name(user) -> str:
    return getattr(user, "username", "system")


def _queue(job: Job, message: str) -> None:
    emit(job, message)
    public_id = str(job.public_id)
    transaction.on_commit(lambda: current_app.signature(TASK).apply_async(args=[public_id], task_id=public_id))


def analysis_of(job: Job):
    """The analysis a timeline-analysis job stored, or None (not yet, or it failed)."""
    return job.timeline_analyses.first()


def run_analysis(*, job_public_id: str) -> str:
    """The task's body: claim the job, read the files with a progress event each, store the analysis, end the job."""
    job = Job.objects.filter(public_id=job_public_id, kind=KIND).first()
    if job is None:
        return "missing"
    now = timezone.now()
    if not Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, started=now, updated=now
    ):
        return "taken"
    job.refresh_from_db()
    broadcast(job)
    final, summary, data = JobStatus.ERROR, "", {}
    try:
        analysis = _profile(job) if "training_job" in job.parameters else _analyse_uploads(job)
        final, summary = (
            JobStatus.SUCCEEDED,
            f"analysis {analysis.public_id} stored ({counted(analysis.rank_count, 'rank')})",
        )
        data = {"analysis": str(analysis.public_id)}
    except serializers.ValidationError as refused:
        final, summary = JobStatus.FAILED, "; ".join(map(str, flat_messages(refused.detail)))
    except Exception as error:  # ERROR with the traceback in its log; the worker goes on
        logger.exception("timeline analysis %s failed", job.public_id)
        emit(job, traceback.format_exc()[-4000:], level=EventLevel.ERROR)
        summary = f"{type(error).__name__}: {error}"
    finally:
        TraceUpload.objects.filter(job=job).delete()
    now = timezone.now()
    if Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
        status=final, finished=now, summary=summary[:300], updated=now
    ):
        job.refresh_from_db()
        levels = {JobStatus.SUCCEEDED: EventLevel.INFO, JobStatus.FAILED: EventLevel.WARNING}
        level = levels.get(final, EventLevel.ERROR)
        emit(job, f"job {final}: {summary}", level=level, data={"status": final, **data})
    return final


def _analyse_uploads(job: Job):
    uploads = list(TraceUpload.objects.filter(job=job).order_by("position"))
    traces, described = [], []
    for done, upload in enumerate(uploads, start=1):
        trace, info = timelines.read_one(io.BytesIO(bytes(upload.content)), upload.name)
        traces.append(trace)
        described.append(info)
        percent = round(100 * done / len(uploads))
        emit(
            job,
            f"{upload.name}: read ({info['decompressed_bytes']:,} bytes, {info['events']:,} events); "
            f"{done} of {counted(len(uploads), 'file')}",
            data={"progress": {"done": done, "total": len(uploads), "percent": percent}},
        )
    files = job.parameters.get("files", [])
    return timelines.store(
        name=job.parameters.get("name") or (files[0] if len(files) == 1 else f"{files[0]} +{len(files) - 1}"),
        traces=traces,
        files=described,
        origin=TimelineOrigin.UPLOAD,
        training_job=None,
        requested_by=job.requested_by,
        job=job,
    )


def _profile(job: Job):
    name, steps = job.parameters["training_job_name"], job.parameters["steps"]
    training_job = TrainingJob.objects.filter(public_id=job.parameters["training_job"]).first()
    if training_job is None:
        raise serializers.ValidationError({"training_job": [f"{name} no longer exists."]})
    emit(job, f"modelling {counted(steps, 'step')} of {name} on each rank")
    shown = [-PROGRESS_EVERY_PERCENT]

    def progress(done: int, total: int) -> None:
        percent = round(100 * done / total)
        if done == total or percent >= shown[0] + PROGRESS_EVERY_PERCENT:
            shown[0] = percent
            emit(
                job,
                f"{done} of {counted(total, 'rank')} read",
                data={"progress": {"done": done, "total": total, "percent": percent}},
            )

    return timelines.analyse_training_job(
        training_job=training_job,
        steps=steps,
        transport="sim",
        requested_by=job.requested_by,
        job=job,
        progress=progress,
    )
