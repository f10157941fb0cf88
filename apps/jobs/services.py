"""Job services: create (validate, resolve targets, shard, enqueue on commit), cancel, finish, reap, prune.

Views, API actions, tasks and commands all call these; none takes a request.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from rest_framework import serializers

from apps.core import audit
from apps.core.choices import AuditAction
from apps.core.text import counted
from apps.inventory.models import Node
from apps.jobs.choices import JOB_ACTIVE, SHARD_TERMINAL, EventLevel, JobStatus, ShardStatus, StepStatus
from apps.jobs.events import broadcast, emit
from apps.jobs.kinds import KINDS, get_kind, not_startable_message
from apps.jobs.models import Artifact, Job, JobEvent, JobShard, JobStep
from apps.nodeexec.transports import default_transport

logger = logging.getLogger(__name__)


# --- targets ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetSpec:
    """Which nodes a job runs on: named nodes (public ids or host names), whole racks, tags, or a role."""

    nodes: tuple[str, ...] = ()
    racks: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    role: str = ""

    @classmethod
    def of(cls, targets: dict) -> "TargetSpec":
        """From the API's validated `targets` object."""
        return cls(
            nodes=tuple(targets.get("nodes", ())),
            racks=tuple(targets.get("racks", ())),
            tags=tuple(targets.get("tags", ())),
            role=targets.get("role", ""),
        )

    def as_json(self) -> dict:
        items = self.__dict__.items()
        return {key: list(value) if isinstance(value, tuple) else value for key, value in items if value}


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Selection:
    """The nodes a spec resolves to, and the drained ones its racks, tags or role matched but left out."""

    nodes: list[Node]
    drained_left_out: list[str]


def resolve_targets(spec: TargetSpec) -> list[Node]:
    """The nodes a spec names, in host name order (drained nodes only when named); see resolve_selection."""
    return resolve_selection(spec).nodes


def resolve_selection(spec: TargetSpec) -> Selection:
    """The nodes a spec names, in host name order; unknown names raise ValidationError naming the field. A drained
    node is taken only when named (host name or id): a rack, tag or role leaves it out, and the Selection says so."""
    errors = {}
    query = Q(pk__in=[])
    if spec.nodes:
        ids = [n for n in spec.nodes if _is_uuid(n)]
        names = [n for n in spec.nodes if not _is_uuid(n)]
        found = Node.objects.filter(Q(public_id__in=ids) | Q(hostname__in=names)).values_list("public_id", "hostname")
        known = {str(pid) for pid, _ in found} | {hostname for _, hostname in found}
        missing = [n for n in spec.nodes if str(n) not in known]
        if missing:
            errors["nodes"] = [f"No such node: {', '.join(missing[:20])}"]
        query |= Q(public_id__in=ids) | Q(hostname__in=names)
    if spec.racks:
        ids = [r for r in spec.racks if _is_uuid(r)]
        names = [r for r in spec.racks if not _is_uuid(r)]
        from apps.inventory.models import Rack

        found = Rack.objects.filter(Q(public_id__in=ids) | Q(name__in=names)).values_list("public_id", "name")
        known = {str(pid) for pid, _ in found} | {name for _, name in found}
        missing = [r for r in spec.racks if str(r) not in known]
        if missing:
            errors["racks"] = [f"No such rack: {', '.join(missing[:20])}"]
        query |= Q(rack__public_id__in=ids) | Q(rack__name__in=names)
    if spec.tags:
        from apps.inventory.models import Tag

        known = set(Tag.objects.filter(slug__in=spec.tags).values_list("slug", flat=True))
        missing = [t for t in spec.tags if t not in known]
        if missing:
            errors["tags"] = [f"No such tag: {', '.join(missing[:20])}"]
        query |= Q(tags__slug__in=spec.tags)
    nodes = Node.objects.filter(query)
    if spec.role:
        nodes = (
            nodes.filter(role=spec.role)
            if (spec.nodes or spec.racks or spec.tags)
            else Node.objects.filter(role=spec.role)
        )
    if errors:
        raise serializers.ValidationError({"targets": errors})
    named = Q(public_id__in=[n for n in spec.nodes if _is_uuid(n)]) | Q(
        hostname__in=[n for n in spec.nodes if not _is_uuid(n)]
    )
    matched = list(nodes.distinct().order_by("hostname"))
    named_ids = set(Node.objects.filter(named).values_list("pk", flat=True)) if spec.nodes else set()
    result = [node for node in matched if node.drained_at is None or node.pk in named_ids]
    left_out = [node.hostname for node in matched if node.drained_at is not None and node.pk not in named_ids]
    if not result:
        message = "No node matches these targets."
        if left_out:
            message = f"Every node matched is drained ({', '.join(left_out[:20])}); name a drained node to use it."
        raise serializers.ValidationError({"targets": [message]})
    return Selection(nodes=result, drained_left_out=left_out)


def describe_targets(stored: dict) -> str:
    """A stored spec (as_json, with_left_out) in words for a page: "racks r04 · nodes gpu017 · drained, left out:
    gpu020"; "" for none."""
    labels = {"nodes": "nodes", "racks": "racks", "tags": "tags", "role": "role"}
    parts = []
    for key, label in labels.items():
        value = (stored or {}).get(key)
        if value:
            parts.append(f"{label} {', '.join(map(str, value)) if isinstance(value, list) else value}")
    if (stored or {}).get("drained_left_out"):
        parts.append(f"drained, left out: {', '.join(stored['drained_left_out'])}")
    return " · ".join(parts)


def with_left_out(spec: TargetSpec, selection: Selection) -> dict:
    """The spec as stored on a job or run, naming the drained nodes it left out (shown with the targets)."""
    stored = spec.as_json()
    if selection.drained_left_out:
        stored["drained_left_out"] = selection.drained_left_out
    return stored


# --- create ---------------------------------------------------------------------------------------------------------


def check_request(*, kind: str, parameters: dict | None, transport: str | None, nodes=()) -> tuple:
    """(the kind, its validated parameters, the transport) for a job of this kind; serializers.ValidationError
    naming the field (`kind`, `parameters`, `transport`) otherwise: unknown kind, parameters the kind refuses or
    whose values fail their command's pattern, a transport the kind or this install does not allow. No transport
    means the kind's default, then the one the target `nodes` record (the demo's: sim), then the install's."""
    if kind not in KINDS:
        raise serializers.ValidationError({"kind": [f"Unknown job kind {kind!r}; known: {', '.join(sorted(KINDS))}."]})
    job_kind = get_kind(kind)
    errors: dict = {}  # every bad field at once, as docs/api.md promises
    try:
        params = job_kind.validate(parameters)
    except serializers.ValidationError as error:
        params, errors["parameters"] = None, error.detail
    transport = transport or job_kind.default_transport or default_transport(offered=job_kind.transports, nodes=nodes)
    if transport not in job_kind.transports:
        errors["transport"] = [f"{kind} runs over {', '.join(job_kind.transports)}, not {transport!r}."]
    elif transport not in settings.RACKPILOT_JOB_TRANSPORTS:
        allowed = ", ".join(settings.RACKPILOT_JOB_TRANSPORTS) or "none"
        errors["transport"] = [f"This install does not allow the {transport} transport (allowed: {allowed})."]
    if params is not None:
        for spec in job_kind.steps(params):  # each placeholder's value against its pattern, before anything is stored
            try:
                spec.argv()
            except ValueError as error:
                errors["parameters"] = [str(error)]
                break
    if errors:
        raise serializers.ValidationError(errors)
    return job_kind, params, transport


def request_errors(*, kind=None, targets: TargetSpec | None = None, parameters=None, transport=None) -> dict:
    """What create_job would refuse of the parts of a request that are known (None: a part its door already refused,
    left out): a door that checks shapes first reports these beside its own, every bad field at once."""
    errors: dict = {}
    nodes = ()
    if targets is not None:
        try:
            nodes = resolve_selection(targets).nodes
        except serializers.ValidationError as error:
            errors |= error.detail
    if kind is not None:
        try:
            check_startable(kind=kind)
            check_request(kind=kind, parameters=parameters, transport=transport, nodes=nodes)
        except serializers.ValidationError as error:
            errors = error.detail | errors
    return errors


def check_startable(*, kind: str) -> None:
    """serializers.ValidationError naming `kind` when the kind starts only through the object holding its approval
    (JobKind.started_through): the direct ways to start a job (the API, the new-job page, job templates) call this
    before create_job, which the approved objects' services call themselves."""
    if kind in KINDS and KINDS[kind].started_through:
        raise serializers.ValidationError({"kind": [not_startable_message(kind)]})


def create_job(
    *,
    kind: str,
    targets: TargetSpec,
    parameters: dict | None = None,
    transport: str | None = None,
    requested_by=None,
    queue: bool = True,
) -> Job:
    """Validate, record the job with its shards and matrix cells, and enqueue its shards once committed (unless
    `queue` is False: the caller runs the shards itself with executor.run_shard, e.g. `manage.py discover --local`,
    which must probe its own host and not a worker's).

    Raises serializers.ValidationError naming the bad field (`kind`, `transport`, `targets`, `parameters.<name>`);
    nothing is created then. `targets` may name nothing where the kind has devices to run on (JobKind.devices).
    """
    errors: dict = {}
    selection = None
    try:
        selection = resolve_selection(targets) if targets.as_json() else Selection(nodes=[], drained_left_out=[])
    except serializers.ValidationError as error:
        errors |= error.detail
    try:
        job_kind, params, transport = check_request(
            kind=kind, parameters=parameters, transport=transport, nodes=selection.nodes if selection else ()
        )
    except serializers.ValidationError as error:
        errors = error.detail | errors
    if errors:  # the request's and the targets' problems together
        raise serializers.ValidationError(errors)
    steps = job_kind.steps(params)
    nodes = selection.nodes
    job_kind.check_nodes(nodes, params)
    devices = job_kind.devices(nodes, params)
    if not nodes and not devices:
        raise serializers.ValidationError({"targets": ["No node matches these targets."]})
    stored = with_left_out(targets, selection) | ({"devices": devices} if devices else {})
    rows = [(node, node.hostname) for node in nodes] + [(None, name) for name in devices]
    shard_size = max(1, settings.RACKPILOT_JOB_SHARD_SIZE)
    with transaction.atomic():
        job = Job.objects.create(
            kind=kind,
            parameters=params,
            transport=transport,
            target_spec=stored,
            requested_by=requested_by if getattr(requested_by, "is_authenticated", False) else None,
            node_count=len(nodes),
            shard_count=-(-len(rows) // shard_size),
        )
        job.nodes.add(*nodes)
        shards = JobShard.objects.bulk_create([JobShard(job=job, index=i) for i in range(job.shard_count)])
        cells = []
        for number, (node, hostname) in enumerate(rows):
            shard = shards[number // shard_size]
            for position, spec in enumerate(steps):
                cells.append(
                    JobStep(
                        job=job,
                        shard=shard,
                        node=node,
                        hostname=hostname,
                        step=spec.name,
                        position=position,
                        label=spec.label or spec.name,
                    )
                )
        JobStep.objects.bulk_create(cells, batch_size=1000)
        who = getattr(requested_by, "username", "") or "system"
        on = job_kind.counted_targets(len(nodes), len(devices))
        emit(job, f"{kind} on {on} over {transport}, requested by {who}", data={"parameters": params})
        if selection.drained_left_out:
            emit(
                job,
                f"Left out {counted(len(selection.drained_left_out), 'drained node')}: "
                f"{', '.join(selection.drained_left_out)}",
                level=EventLevel.WARNING,
                data={"drained_left_out": selection.drained_left_out},
            )
        audit.record(
            AuditAction.START,
            obj=job,
            object_repr=f"{kind} job on {on}",
            changes={"kind": [None, kind], "transport": [None, transport], "nodes": [None, len(nodes)]},
            user=requested_by,
            job=job,
        )
        if queue:
            transaction.on_commit(lambda: enqueue(job))
    return job


RUN_SHARD_TASK = "rackpilot.jobs.run_shard"


def enqueue(job: Job) -> None:
    # By the task's name, not by importing tasks.py (which imports the executor, which imports this module). A
    # signature of a registered task still goes through Task.apply_async, so eager mode and routing apply.
    for shard in job.shards.all():
        if shard.status == ShardStatus.QUEUED:
            current_app.signature(RUN_SHARD_TASK).apply_async(
                args=[str(job.public_id), shard.index], task_id=shard.task_id
            )


def enqueue_rerun(job: Job, shard: JobShard) -> None:
    """Send a re-queued shard again (its own task id: `<shard task id>-rerun<n>`)."""
    current_app.signature(RUN_SHARD_TASK).apply_async(
        args=[str(job.public_id), shard.index], task_id=f"{shard.task_id}-rerun{shard.attempts}"
    )


# --- cancel -------------------------------------------------------------------------------------------------------


def cancel_job(*, job: Job, user=None) -> Job:
    """No new command starts; running ones are killed (TERM, then KILL) by the shards; the job ends canceled."""
    who = getattr(user, "username", "") or "system"
    now = timezone.now()
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, status__in=JOB_ACTIVE, cancel_requested=False).exists():
            audit.record(AuditAction.CANCEL, obj=job, object_repr=f"{job.kind} job", user=user, job=job)
        if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
            status=JobStatus.CANCELED, cancel_requested=True, finished=now, summary=f"canceled by {who}"
        ):
            JobShard.objects.filter(job=job, status=ShardStatus.QUEUED).update(
                status=ShardStatus.CANCELED, finished=now
            )
            JobStep.objects.filter(job=job, status=StepStatus.PENDING).update(
                status=StepStatus.CANCELED, summary="canceled before it started", updated=now
            )
            job.refresh_from_db()
            transaction.on_commit(lambda: _tell_kind_finished(job))  # over without a shard: its end is here
            emit(job, f"canceled by {who} before it started", level=EventLevel.WARNING)
            return job
        if Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING, cancel_requested=False).update(
            cancel_requested=True
        ):
            job.refresh_from_db()
            emit(job, f"cancel requested by {who}", level=EventLevel.WARNING)
        else:
            job.refresh_from_db()
    return job


# --- shards and the lifecycle -----------------------------------------------------------------------------------


def claim_shard(*, job: Job, index: int, worker: str) -> JobShard | None:
    """QUEUED -> RUNNING for the shard (and the job, if first). None: someone else has it, or it is over."""
    now = timezone.now()
    claimed = JobShard.objects.filter(job=job, index=index, status=ShardStatus.QUEUED).update(
        status=ShardStatus.RUNNING,
        started=now,
        heartbeat=now,
        worker=worker[:200],
        updated=now,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, started=now, heartbeat=now, updated=now
    ):
        job.refresh_from_db()
        broadcast(job)
    return JobShard.objects.get(job=job, index=index)


def beat(*, shard: JobShard) -> tuple[bool, str]:
    """Heartbeat of a running shard; answers (cancel requested, job status)."""
    now = timezone.now()
    JobShard.objects.filter(pk=shard.pk, status=ShardStatus.RUNNING).update(heartbeat=now)
    Job.objects.filter(pk=shard.job_id, status=JobStatus.RUNNING).update(heartbeat=now)
    cancel, status = Job.objects.filter(pk=shard.job_id).values_list("cancel_requested", "status").get()
    return cancel, status


def finish_shard(*, shard: JobShard, status: str, summary: str = "") -> bool:
    """RUNNING -> status for the shard (once), settle the cells it never finished, and end the job if all are over."""
    now = timezone.now()
    if not JobShard.objects.filter(pk=shard.pk, status=ShardStatus.RUNNING).update(
        status=status, finished=now, updated=now
    ):
        return False
    _settle_cells(shard=shard, status=status, summary=summary)
    finish_job_if_done(job=Job.objects.get(pk=shard.job_id), summary=summary)
    return True


def _settle_cells(*, shard: JobShard, status: str, summary: str) -> None:
    """Cells a shard never reached end with it (a crash, a cancel, an error before the fan-out)."""
    if status == ShardStatus.DONE:
        return
    now = timezone.now()
    error = status == ShardStatus.ERROR
    JobStep.objects.filter(shard=shard, status=StepStatus.RUNNING).update(
        status=StepStatus.ERROR if error else StepStatus.CANCELED,
        summary=(summary or status)[:300],
        finished=now,
        updated=now,
    )
    JobStep.objects.filter(shard=shard, status=StepStatus.PENDING).update(
        status=StepStatus.SKIPPED if error else StepStatus.CANCELED, summary=(summary or status)[:300], updated=now
    )


def finish_job_if_done(*, job: Job, summary: str = "") -> Job:
    """When every shard is over, the job takes its final status (once: a conditional update)."""
    with transaction.atomic():
        # Taking the write lock first (UPDATE) serialises shards finishing at the same time, on SQLite too.
        Job.objects.filter(pk=job.pk).update(updated=timezone.now())
        shard_states = list(JobShard.objects.filter(job=job).values_list("status", flat=True))
        if any(state not in SHARD_TERMINAL for state in shard_states):
            return job
        current = Job.objects.get(pk=job.pk)
        if current.status not in JOB_ACTIVE:
            return current
        failed = JobStep.objects.filter(job=job, status__in=[StepStatus.FAILED, StepStatus.ERROR]).count()
        if ShardStatus.ERROR in shard_states:
            final, text = JobStatus.ERROR, summary or "a shard of the job stopped with an error"
        elif current.cancel_requested or ShardStatus.CANCELED in shard_states:
            final, text = JobStatus.CANCELED, current.summary or "canceled"
        elif failed:
            final, text = JobStatus.FAILED, f"{counted(failed, 'step')} failed"
        else:
            final, text = JobStatus.SUCCEEDED, "all steps succeeded"
        now = timezone.now()
        if not Job.objects.filter(pk=job.pk, status__in=JOB_ACTIVE).update(
            status=final, finished=now, summary=text[:300], updated=now
        ):
            return Job.objects.get(pk=job.pk)
        current.refresh_from_db()
        # Registered before the final event's push: a page that reloads on that push finds the kind's results
        # (a deployment's state) already settled.
        transaction.on_commit(lambda: _tell_kind_finished(current))
        level = EventLevel.INFO if final == JobStatus.SUCCEEDED else EventLevel.WARNING
        if final == JobStatus.ERROR:
            level = EventLevel.ERROR
        emit(current, f"job {final}: {text}", level=level, data={"status": final})
    return current


def _tell_kind_finished(job: Job) -> None:
    try:
        get_kind(job.kind).job_finished(job)
    except LookupError:
        return
    except Exception:  # the job is over whatever its kind makes of it; say so in the log, keep the worker going
        logger.exception("job %s: the %s kind's job_finished failed", job.public_id, job.kind)


# --- the reaper and retention ---------------------------------------------------------------------------------


def reap_stale_jobs(*, now=None) -> int:
    """Shards whose heartbeat went stale lost their worker. A shard of a kind that may run twice
    (`rerun_on_worker_loss`) and has re-runs left is re-queued to a live worker, its cells reset to pending; any
    other ends in error ("worker lost"), and so does its job. Also ends re-queued shards no worker claimed in time.

    Safe to run in several processes at once (beat's thread, a system worker): every step is a conditional update.
    Returns how many shards it re-queued or ended."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RACKPILOT_JOB_STALE_SECONDS)
    reaped = 0
    for shard in JobShard.objects.filter(status=ShardStatus.RUNNING, heartbeat__lt=cutoff).select_related("job"):
        stale = JobShard.objects.filter(pk=shard.pk, status=ShardStatus.RUNNING, heartbeat__lt=cutoff)
        last = shard.heartbeat.isoformat() if shard.heartbeat else "never"
        lost = f"worker lost: {shard.worker or 'a worker'} stopped sending heartbeats (last {last})"
        if _may_rerun(shard):
            if _requeue(shard, stale, lost, now=now):
                reaped += 1
            continue
        if not stale.update(status=ShardStatus.ERROR, finished=now, updated=now):
            continue  # it beat or finished meanwhile
        reaped += 1
        emit(shard.job, lost, level=EventLevel.ERROR, data={"shard": shard.index, "worker": shard.worker})
        _settle_cells(shard=shard, status=ShardStatus.ERROR, summary="worker lost")
        _end_orphaned_commands(shard)
        finish_job_if_done(job=shard.job, summary="worker lost")
    # A job without shards (a background inventory import) beats on the job itself; one without a heartbeat
    # (SQLite, where the import holds the only write lock) is left alone.
    for job in Job.objects.filter(status=JobStatus.RUNNING, shard_count=0, heartbeat__lt=cutoff):
        last = job.heartbeat.isoformat()
        if Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING, heartbeat__lt=cutoff).update(
            status=JobStatus.ERROR, finished=now, summary="worker lost", updated=now
        ):
            reaped += 1
            job.refresh_from_db()
            emit(job, f"worker lost: the worker stopped sending heartbeats (last {last})", level=EventLevel.ERROR)
    waited = now - timedelta(seconds=settings.RACKPILOT_JOB_REQUEUE_WAIT_SECONDS)
    for shard in JobShard.objects.filter(status=ShardStatus.QUEUED, attempts__gt=0, updated__lt=waited).select_related(
        "job"
    ):
        if not JobShard.objects.filter(pk=shard.pk, status=ShardStatus.QUEUED, updated__lt=waited).update(
            status=ShardStatus.ERROR, finished=now, updated=now
        ):
            continue
        reaped += 1
        wait = settings.RACKPILOT_JOB_REQUEUE_WAIT_SECONDS
        text = f"worker lost: no worker took re-queued shard {shard.index} within {wait} s"
        emit(shard.job, text, level=EventLevel.ERROR, data={"shard": shard.index})
        _settle_cells(shard=shard, status=ShardStatus.ERROR, summary="worker lost")
        finish_job_if_done(job=shard.job, summary="worker lost")
    return reaped


def _may_rerun(shard: JobShard) -> bool:
    kind = KINDS.get(shard.job.kind)
    reruns_done = max(0, shard.attempts - 1)
    return (
        kind is not None
        and kind.rerun_on_worker_loss
        and reruns_done < settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS
        and not shard.job.cancel_requested
    )


def _requeue(shard: JobShard, stale, lost: str, *, now) -> bool:
    """RUNNING (stale) -> QUEUED: end what the lost run left running, reset its cells, send the shard again."""
    if not stale.update(status=ShardStatus.QUEUED, worker="", started=None, heartbeat=None, updated=now):
        return False
    job = shard.job
    _end_orphaned_commands(shard)  # before anything runs the shard again: no two runs of its commands at once
    with transaction.atomic():
        cells = JobStep.objects.filter(shard=shard)
        Artifact.objects.filter(step__in=cells).delete()  # the lost run's partial output; the re-run writes its own
        cells.update(status=StepStatus.PENDING, exit_code=None, started=None, finished=None, summary="", updated=now)
        reruns = settings.RACKPILOT_JOB_WORKER_LOSS_RERUNS
        emit(
            job,
            f"{lost}; shard {shard.index} re-queued (re-run {shard.attempts} of {reruns}), its cells reset to pending",
            level=EventLevel.WARNING,
            data={"shard": shard.index, "worker": shard.worker, "requeued": True, "attempt": shard.attempts + 1},
        )
        shard.status, shard.worker = ShardStatus.QUEUED, ""
        transaction.on_commit(lambda: enqueue_rerun(job, shard))
    broadcast(job, steps=list(JobStep.objects.filter(shard=shard)))
    return True


def _end_orphaned_commands(shard: JobShard) -> None:
    """What the lost worker started keeps running (reparented to init, or under sshd): end it by its marker."""
    from apps.jobs.orphans import end_orphaned_commands

    try:
        line = end_orphaned_commands(job=shard.job, shard=shard)
    except Exception as error:  # the reaper goes on with the other shards
        logger.exception("could not end the commands of shard %s of job %s", shard.index, shard.job.public_id)
        emit(shard.job, f"could not end the commands left running: {error}", level=EventLevel.WARNING)
        return
    if line:
        emit(shard.job, line, level=EventLevel.WARNING, data={"shard": shard.index})


def prune_old_output(*, now=None) -> tuple[int, int]:
    """Delete the events and artifacts of jobs that finished longer ago than the retention period."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.RACKPILOT_JOB_RETENTION_DAYS)
    old_jobs = Job.objects.filter(finished__lt=cutoff)
    events, _ = JobEvent.objects.filter(job__in=old_jobs).delete()
    artifacts, _ = Artifact.objects.filter(step__job__in=old_jobs).delete()
    return events, artifacts
