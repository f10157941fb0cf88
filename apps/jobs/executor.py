"""Runs one shard of a job: claims it, fans its nodes out over the job's transport, records everything, finishes.

The one lifecycle wrapper: QUEUED -> RUNNING by a conditional update (zero rows: someone else has it, or it is
over, and nothing runs twice) -> DONE / CANCELED, and any unexpected exception -> ERROR with the traceback as an
event. The job takes its final status when its last shard ends (services.finish_job_if_done).
"""

import asyncio
import logging
import socket
import time
import traceback

from django.conf import settings
from django.utils import timezone

from apps.jobs import services
from apps.jobs.choices import JOB_TERMINAL, EventLevel, ShardStatus, StepStatus
from apps.jobs.events import Recorder, current_recorder, emit, install_log_bridge
from apps.jobs.kinds import StepSpec, get_kind
from apps.jobs.models import Job, JobShard, JobStep
from apps.jobs.orphans import command_marker
from apps.jobs.targets import node_targets
from apps.nodeexec.base import STDERR, CommandResult, NodeTarget
from apps.nodeexec.fanout import PlannedStep, fan_out
from apps.nodeexec.transports import get_transport

logger = logging.getLogger(__name__)


def worker_name() -> str:
    return f"{socket.gethostname()}:{__import__('os').getpid()}"


def run_shard(*, job_public_id: str, index: int, worker: str | None = None) -> str:
    """Run shard `index` of the job. Returns what happened: claimed-by-other, done, canceled or error."""
    job = Job.objects.filter(public_id=job_public_id).first()
    if job is None:
        return "missing"
    shard = services.claim_shard(job=job, index=index, worker=worker or worker_name())
    if shard is None:
        return "claimed-by-other"
    job.refresh_from_db()
    try:
        status = _run_claimed(job, shard)
    except BaseException as error:  # noqa: B036  (time limits and worker shutdown end the shard in error too)
        text = "".join(traceback.format_exception(error)).strip()
        try:
            emit(
                job,
                f"shard {index} stopped with an error: {error!r}",
                level=EventLevel.ERROR,
                data={"traceback": text[-20000:], "shard": index},
            )
            services.finish_shard(shard=shard, status=ShardStatus.ERROR, summary=f"error: {error!r}"[:300])
        except Exception:
            logger.exception("job %s shard %s: could not record its error", job.public_id, index)
        if not isinstance(error, Exception):
            raise
        return "error"
    return status


class _CellObserver:
    """Turns fan-out callbacks into matrix cell updates, log events and artifacts (through the recorder). Its
    methods run on the fan-out's event loop: they only append to the recorder's lists, whose thread writes them."""

    def __init__(self, recorder: Recorder, kind, specs: dict[str, StepSpec], cells: dict[tuple[str, str], int]):
        self.recorder, self.kind, self.specs, self.cells = recorder, kind, specs, cells
        self.line_cap = settings.RACKPILOT_JOB_EVENT_LINES_PER_STEP
        self.artifact_cap = settings.RACKPILOT_ARTIFACT_MAX_BYTES
        self.lines: dict[tuple[str, str], int] = {}

    def step_started(self, target: NodeTarget, step: PlannedStep) -> None:
        self.recorder.step(self.cells[target.hostname, step.name], status=StepStatus.RUNNING, started=timezone.now())

    def output(self, target: NodeTarget, step: PlannedStep, stream: str, line: str) -> None:
        key = (target.hostname, step.name)
        count = self.lines[key] = self.lines.get(key, 0) + 1
        if self.kind.private_output:  # a file a user named: kept in the artifact (operators+), not in the log
            if count == 1:
                self.recorder.event(
                    "output kept in the step's artifact (operators and admins read it)",
                    hostname=target.hostname,
                    step=step.name,
                )
            return
        if count <= self.line_cap:
            self.recorder.event(
                line,
                level=EventLevel.OUTPUT,
                hostname=target.hostname,
                step=step.name,
                data={"stream": stream} if stream == STDERR else None,
            )
        elif count == self.line_cap + 1:
            self.recorder.event(
                f"more output than {self.line_cap} lines: the rest is in the step's artifact",
                level=EventLevel.WARNING,
                hostname=target.hostname,
                step=step.name,
            )

    def step_finished(self, target: NodeTarget, step: PlannedStep, result: CommandResult) -> None:
        record = self.kind.cell_record(target, self.specs[step.name], result)
        status, summary = record.status, record.summary
        pk = self.cells[target.hostname, step.name]
        self.recorder.step(pk, status=status, exit_code=result.exit_code, finished=timezone.now(), summary=summary)
        for stream, data, size in (
            ("stdout", result.stdout, result.stdout_size),
            ("stderr", result.stderr, result.stderr_size),
        ):
            if size:
                self.recorder.artifact(pk, stream, data, size, self.artifact_cap)
        level = EventLevel.INFO if status == StepStatus.SUCCEEDED else EventLevel.ERROR
        if status == StepStatus.CANCELED:
            level = EventLevel.WARNING
        data = {"status": status, "exit_code": result.exit_code, "duration": round(result.duration, 3)}
        data.update(record.data)
        if result.fingerprint:
            data["fingerprint"] = result.fingerprint
            if target.node_id is not None and result.host_key:
                self.recorder.host_key(target.node_id, result.host_key, result.fingerprint)
        self.recorder.event(
            f"{step.name}: {status}" + (f" — {summary}" if summary else ""),
            level=level,
            hostname=target.hostname,
            step=step.name,
            data=data,
        )

    def step_skipped(self, target: NodeTarget, step: PlannedStep, reason: str, *, canceled: bool) -> None:
        status = StepStatus.CANCELED if canceled else StepStatus.SKIPPED
        self.recorder.step(self.cells[target.hostname, step.name], status=status, summary=reason)


def _run_claimed(job: Job, shard: JobShard) -> str:

    loop_box: dict = {}
    cancel_state = {"requested": False, "next_beat": 0.0}

    def tick():
        # Heartbeat and cancel poll, from the recorder's thread (never blocks the fan-out's event loop).
        now = time.monotonic()
        if now < cancel_state["next_beat"]:
            return
        cancel_state["next_beat"] = now + settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS
        requested, status = services.beat(shard=shard)
        job.status, job.cancel_requested = status, requested
        if (requested or status in JOB_TERMINAL) and not cancel_state["requested"]:
            cancel_state["requested"] = True
            loop, event = loop_box.get("loop"), loop_box.get("cancel")
            if loop is not None:
                loop.call_soon_threadsafe(event.set)

    # Celery workers replace the root logger's handlers at start: (re)install the bridge where the job runs.
    install_log_bridge()
    recorder = Recorder(job, interval=settings.RACKPILOT_EVENT_FLUSH_MS / 1000, on_tick=tick).start()
    token = current_recorder.set((recorder, ""))
    try:
        kind = get_kind(job.kind)
        specs = kind.steps(job.parameters)
        kind.prepare(job, shard)
        plan = [
            PlannedStep(
                name=s.name,
                argv=tuple(s.argv()),
                timeout=s.timeout_seconds(),
                stop_on_failure=s.stop_on_failure,
                runner=kind.step_runner(s),
            )
            for s in specs
        ]
        cells = {(h, s): pk for pk, h, s in JobStep.objects.filter(shard=shard).values_list("pk", "hostname", "step")}
        targets = node_targets(job, shard)
        devices = len(set(job.devices) & {target.hostname for target in targets})
        recorder.event(
            f"shard {shard.index}: {kind.counted_targets(len(targets) - devices, devices)} on {shard.worker}",
            data={"shard": shard.index, "worker": shard.worker},
        )

        async def main():
            loop_box["cancel"] = cancel = asyncio.Event()
            loop_box["loop"] = asyncio.get_running_loop()
            if cancel_state["requested"] or job.cancel_requested or job.status in JOB_TERMINAL:
                cancel.set()
            await fan_out(
                targets,
                plan,
                transport=get_transport(job.transport, marker=command_marker(job, shard)),
                observer=_CellObserver(recorder, kind, {s.name: s for s in specs}, cells),
                cancel=cancel,
                window=settings.RACKPILOT_JOB_WINDOW,
                grace=settings.RACKPILOT_JOB_KILL_GRACE_SECONDS,
                output_cap=settings.RACKPILOT_ARTIFACT_MAX_BYTES,
            )
            return cancel.is_set()

        canceled = asyncio.run(main())
        recorder.close()  # every cell's output is in the database before the kind reads it
        if not canceled:
            kind.shard_finished(job, shard)
    finally:
        current_recorder.reset(token)
        recorder.close()
    status = ShardStatus.CANCELED if canceled else ShardStatus.DONE
    services.finish_shard(shard=shard, status=status, summary="canceled" if canceled else "")
    return str(status)
