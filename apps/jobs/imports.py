"""The inventory import as a background job: one Celery task recorded as a Job with events, not a job kind.

Why not a kind: a kind is a node x step matrix run over a transport, and create_job needs target nodes; an import
has no nodes, runs no command and is one transaction on one worker. So it is a Job without shards or cells
(kind `inventory-import`), whose task (`rackpilot.jobs.import_inventory`, task id = the job's public id) claims it
QUEUED -> RUNNING by a conditional update, runs apps.inventory.transfer.import_inventory() and ends it once. The
job's events carry the progress (`data.progress`: total, done = rows checked, written, percent, section) and, when
the file is refused, one event per problem (section, line, field, message); the job page and the API read them like
any job's. The uploaded file waits in apps.inventory ImportFile for a worker on any host, and is deleted at the end.

Progress must reach the page while the import's transaction is still open, so it is written on another
connection: the job's Recorder thread, which also beats the heartbeat and polls the cancel flag. SQLite has one
writer at a time, and the import holds it until it ends: there, progress events are kept and written after the
transaction, the heartbeat is not beaten (the reaper leaves a job without a heartbeat alone) and a cancel is seen
only at the end (docs/inventory.md).
"""

import logging
import traceback

from celery import current_app
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from apps.core.text import counted
from apps.inventory.models import ImportFile
from apps.inventory.transfer import ImportProgress, ImportRejected, import_inventory
from apps.inventory.transfer.background import BackgroundImport
from apps.jobs.choices import JOB_TERMINAL, EventLevel, JobStatus
from apps.jobs.events import Recorder, broadcast, emit
from apps.jobs.models import Job

logger = logging.getLogger(__name__)

IMPORT_KIND = "inventory-import"
IMPORT_TASK = "rackpilot.jobs.import_inventory"
MAX_PROBLEM_EVENTS = 1000  # one event each; past this the final event says how many more


class _Canceled(Exception):
    pass


def start_inventory_import(*, text: str, fmt: str, name: str = "", user=None, dry_run: bool = False):
    """Store the file, record the job, and queue its task once committed."""
    who = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        upload = ImportFile.of(text=text, fmt=fmt, name=name, user=who)
        upload.save()
        job = Job.objects.create(
            kind=IMPORT_KIND,
            parameters={
                "file": str(upload.public_id),
                "name": upload.name,
                "format": fmt,
                "bytes": upload.size_bytes,
                "dry_run": dry_run,
            },
            transport="",
            requested_by=who,
            shard_count=0,
        )
        requester = getattr(who, "username", "") or "system"
        what = "dry run of an inventory import" if dry_run else "inventory import"
        emit(job, f"{what} of {name or 'a file'} ({upload.size_bytes:,} bytes of {fmt}), requested by {requester}")
        public_id = str(job.public_id)
        transaction.on_commit(
            lambda: current_app.signature(IMPORT_TASK).apply_async(args=[public_id], task_id=public_id)
        )
    return BackgroundImport(
        job_id=public_id,
        api_path=reverse("api:job-detail", kwargs={"id": public_id}),
        page_path=reverse("job-page", kwargs={"public_id": public_id}),
    )


def run_inventory_import(*, job_public_id: str) -> str:
    """The task's body: claim, import with progress, record the end. Returns the final status."""
    job = Job.objects.filter(public_id=job_public_id, kind=IMPORT_KIND).first()
    if job is None:
        return "missing"
    concurrent = connection.vendor != "sqlite"  # a second connection may write while the import runs
    now = timezone.now()
    beat = now if concurrent else None
    if not Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, started=now, heartbeat=beat, updated=now
    ):
        if Job.objects.filter(pk=job.pk, status__in=JOB_TERMINAL).exists():  # canceled while queued
            ImportFile.objects.filter(public_id=job.parameters.get("file")).delete()
        return "taken"
    job.refresh_from_db()
    broadcast(job)
    canceled = {"asked": False}

    def tick() -> None:  # the recorder's thread, its own connection
        Job.objects.filter(pk=job.pk).update(heartbeat=timezone.now())
        canceled["asked"] = Job.objects.filter(pk=job.pk, cancel_requested=True).exists()

    recorder = Recorder(job, interval=0.5, on_tick=tick)
    if concurrent:
        recorder.start()

    def report(progress: ImportProgress) -> None:
        if canceled["asked"]:
            raise _Canceled
        data = {**progress.as_dict(), "done": progress.validated}
        recorder.event(
            f"{progress.validated:,} of {progress.total:,} rows checked, {progress.written:,} written "
            f"({progress.percent}%, {progress.section})",
            data={"progress": data},
            at_once=True,  # a few a file (every 250 rows): the page follows the import as it goes, however fast
        )

    upload = ImportFile.objects.filter(public_id=job.parameters.get("file")).first()
    final, summary, level, data = JobStatus.ERROR, "", EventLevel.ERROR, {}
    try:
        if upload is None:
            summary = "the uploaded file is gone"
        else:
            user = get_user_model().objects.filter(pk=job.requested_by_id).first()
            result = import_inventory(
                text=upload.text(), fmt=upload.fmt, user=user, dry_run=job.parameters.get("dry_run", False),
                progress=report,
            )  # fmt: skip
            totals = result.totals
            verb = "checked (dry run, nothing saved)" if result.dry_run else "imported"
            final, level = JobStatus.SUCCEEDED, EventLevel.INFO
            summary = f"{verb}: {totals.created} created, {totals.updated} updated, {totals.unchanged} unchanged"
            data = {"result": result.as_dict()}
    except ImportRejected as rejected:
        problems = rejected.problems
        for problem in problems[:MAX_PROBLEM_EVENTS]:
            where = f"line {problem.line}" if problem.line else problem.location or problem.section
            what = f"{problem.section}.{problem.field}" if problem.field else problem.section
            recorder.event(f"{where}, {what}: {problem.message}", level=EventLevel.WARNING, data=problem.as_dict())
        final, level = JobStatus.FAILED, EventLevel.WARNING
        summary = f"{counted(len(problems), 'problem')}; nothing was imported"
        data = {"problems": len(problems), "listed": min(len(problems), MAX_PROBLEM_EVENTS)}
    except _Canceled:
        final, level, summary = JobStatus.CANCELED, EventLevel.WARNING, "canceled; nothing was imported"
    except Exception as error:  # the job ends in error with the traceback in its log, the worker goes on
        logger.exception("inventory import %s failed", job.public_id)
        recorder.event(traceback.format_exc()[-4000:], level=EventLevel.ERROR)
        summary = f"{type(error).__name__}: {error}; nothing was imported"
    finally:
        recorder.close()
        if upload is not None:
            upload.delete()
    now = timezone.now()
    if Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
        status=final, finished=now, summary=summary[:300], heartbeat=now if concurrent else None, updated=now
    ):
        job.refresh_from_db()
        emit(job, f"job {final}: {summary}", level=level, data={"status": final, **data})
    return final
