"""Live progress: events and step changes written in batches, then pushed to the job's Channels group.

The database is the truth: a batch is committed first (its own short transaction, outside any task transaction),
then one message per batch goes to group `job.<public_id>` and a status line to group `jobs`. Channel layers may
drop messages; consumers and clients refill gaps from the database.

Event seq numbers are gapless per job even with several shards writing at once: a batch takes its range by bumping
Job.last_seq (UPDATE ... SET last_seq = last_seq + n, which holds the row lock, or SQLite's write lock) and inserts
its events in the same transaction, so a failed insert gives the range back.
"""

import asyncio
import contextvars
import enum
import json
import logging
import threading
import time
from collections.abc import Callable

from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections, connection, transaction
from django.db.models import Count
from django.utils import timezone

from apps.jobs.choices import (
    FAILED_STEPS,
    JOB_STATUS_COLOURS,
    STEP_STATUS_COLOURS,
    STEP_TERMINAL,
    EventLevel,
    JobStatus,
)
from apps.jobs.models import Artifact, Job, JobEvent, JobStep, compress

logger = logging.getLogger(__name__)

LIST_GROUP = "jobs"


def job_group(public_id) -> str:
    return f"job.{public_id}"


def event_dict(event: JobEvent) -> dict:
    return {
        "seq": event.seq,
        "t": event.created.isoformat() if event.created else None,
        "level": event.level,
        "hostname": event.hostname,
        "step": event.step,
        "message": event.message,
        "data": event.data,
    }


def step_dict(step: JobStep) -> dict:
    return {
        "hostname": step.hostname,
        "step": step.step,
        "status": step.status,
        "colour": STEP_STATUS_COLOURS.get(step.status, "grey"),
        "exit_code": step.exit_code,
        "summary": step.summary,
        "started": step.started.isoformat() if step.started else None,
        "finished": step.finished.isoformat() if step.finished else None,
    }


def progress_of(job_id: int) -> dict:
    counts = dict(JobStep.objects.filter(job_id=job_id).values_list("status").annotate(n=Count("id")).order_by())
    total = sum(counts.values())
    done = sum(n for status, n in counts.items() if status in STEP_TERMINAL)
    if not total:  # a job without a matrix (a background import) reports progress in its events' data
        latest = (
            JobEvent.objects.filter(job_id=job_id, data__has_key="progress").order_by("-seq").values("data").first()
        )
        if latest:
            progress = latest["data"]["progress"]
            return {"total": progress["total"], "done": progress["done"], "percent": progress["percent"], "counts": {}}
    failed = [status for status in FAILED_STEPS if counts.get(status)]
    failed_cells = JobStep.objects.filter(job_id=job_id, status__in=failed)
    return {
        "total": total,
        "done": done,
        "percent": round(100 * done / total) if total else 0,
        "counts": counts,
        # Nodes with a failed cell: the matrix's "N nodes with a failure" moves with its cells.
        "failed_nodes": failed_cells.values("hostname").distinct().count() if failed else 0,
    }


def job_status_dict(job: Job, progress: dict | None = None) -> dict:
    return {
        "id": str(job.public_id),
        "kind": job.kind,
        "status": job.status,
        "colour": JOB_STATUS_COLOURS.get(job.status, "grey"),
        "summary": job.summary,
        "cancel_requested": job.cancel_requested,
        # In the portal's time zone, as the page renders them and the API gives them (the page shows them as sent).
        "started": timezone.localtime(job.started).isoformat() if job.started else None,
        "finished": timezone.localtime(job.finished).isoformat() if job.finished else None,
        "last_seq": job.last_seq,
        "progress": progress if progress is not None else progress_of(job.pk),
    }


def append_events(job_id: int, events: list[dict]) -> list[JobEvent]:
    """Write events with the next seq numbers of the job, gapless, in one short transaction."""
    if not events:
        return []
    now = timezone.now()
    meta = Job._meta
    table, column, pk = (connection.ops.quote_name(name) for name in (meta.db_table, "last_seq", meta.pk.column))
    with transaction.atomic(), connection.cursor() as cursor:
        # The UPDATE takes the job row's lock (SQLite: the write lock) until the commit: seq ranges never overlap.
        cursor.execute(f"UPDATE {table} SET {column} = {column} + %s WHERE {pk} = %s", [len(events), job_id])
        if cursor.rowcount != 1:
            raise Job.DoesNotExist(f"job {job_id} does not exist")
        cursor.execute(f"SELECT {column} FROM {table} WHERE {pk} = %s", [job_id])
        last = cursor.fetchone()[0]
        first = last - len(events) + 1
        rows = [
            JobEvent(
                job_id=job_id,
                seq=first + offset,
                level=item.get("level", EventLevel.INFO),
                hostname=item.get("hostname", ""),
                step=item.get("step", ""),
                message=item.get("message", ""),
                data=item.get("data") or {},
                created=now,
                updated=now,
            )
            for offset, item in enumerate(events)
        ]
        _insert_rows(rows)
    return rows


def _insert_rows(rows: list) -> None:
    """INSERT model rows with executemany (the rows' pk stays None: nothing reads it back).

    QuerySet.bulk_create compiles every value of every row through the ORM: several times the CPU for the same
    statement. Values are still prepared by each field (JSON, datetimes) exactly as the ORM would.
    """
    meta = rows[0]._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    with connection.cursor() as cursor:
        cursor.executemany(
            sql,
            [
                [field.get_db_prep_save(_plain(getattr(row, field.attname)), connection) for field in fields]
                for row in rows
            ],
        )


# --- pushing to Channels ------------------------------------------------------------------------------------------

_server_loop: asyncio.AbstractEventLoop | None = None


def register_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The ASGI server's loop (set by consumers): with the in-memory layer, sends must happen on that loop."""
    global _server_loop
    _server_loop = loop


class Broadcaster:
    """Sends to the channel layer from a synchronous thread, keeping one event loop (and Redis pool) per thread."""

    def __init__(self):
        self.layer = get_channel_layer()
        self._loop: asyncio.AbstractEventLoop | None = None

    def send(self, messages: list[tuple[str, dict]]) -> None:
        if self.layer is None or not messages:
            return

        async def send_all():
            for group, message in messages:
                await self.layer.group_send(group, message)

        try:
            loop = _server_loop
            if _is_in_memory(self.layer) and loop is not None and loop.is_running():
                asyncio.run_coroutine_threadsafe(send_all(), loop).result(timeout=5)
                return
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(send_all())
        except Exception:  # the database has everything; a lost push is refilled by the clients
            logger.warning("could not push job events to the channel layer", exc_info=True)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _is_in_memory(layer) -> bool:
    return type(layer).__name__ == "InMemoryChannelLayer"


def batch_message(events: list[JobEvent], steps: list[JobStep] = (), state: dict | None = None) -> dict:
    """The group message for one batch: the websocket frame already serialised, once for every watcher.

    Encoding the frame per client cost more CPU than anything else at 1,000 events/s to 200 clients
    (bench/events.py). `first`/`last` are the batch's seq range, so a consumer sends the text as it is unless its
    client already has some of the events (then it decodes and filters: only after a replay overlapped).
    """
    frame = {
        "type": "batch",
        "events": [event_dict(e) for e in events],
        "steps": [step_dict(s) for s in steps],
        "job": state,
    }
    return {
        "type": "job.batch",
        "first": events[0].seq if events else None,
        "last": events[-1].seq if events else None,
        "frame": json.dumps(frame, cls=DjangoJSONEncoder),
    }


def broadcast(
    job: Job,
    *,
    events: list[JobEvent] = (),
    steps: list[JobStep] = (),
    status: bool = True,
    broadcaster: Broadcaster | None = None,
) -> None:
    """Push one batch for the job (and a status line for the job list). Call after the rows are committed."""
    own = broadcaster is None
    broadcaster = broadcaster or Broadcaster()
    try:
        messages = []
        state = job_status_dict(job) if status else None
        if events or steps or state:
            messages.append((job_group(job.public_id), batch_message(events, steps, state)))
        if state:
            messages.append((LIST_GROUP, {"type": "jobs.status", "job": state}))
        broadcaster.send(messages)
    finally:
        if own:
            broadcaster.close()


def emit(
    job: Job,
    message: str,
    *,
    level: str = EventLevel.INFO,
    hostname: str = "",
    step: str = "",
    data: dict | None = None,
    status: bool = True,
) -> JobEvent:
    """Write one event now and push it (for services: cancel, finish, reaper)."""
    rows = append_events(
        job.pk, [{"level": level, "message": message, "hostname": hostname, "step": step, "data": data or {}}]
    )
    job.last_seq = rows[-1].seq
    transaction.on_commit(lambda: broadcast(job, events=rows, status=status))
    return rows[0]


# --- the recorder a running shard writes through ----------------------------------------------------------------


class Recorder:
    """Collects events, step changes and artifacts from any thread; a thread of its own writes them in batches.

    Flushes every `interval` seconds, as soon as `max_batch` items wait, or at once for an event recorded `at_once`.
    `on_tick` runs in the recorder thread after each flush (the executor uses it for heartbeats and cancel polling).
    """

    def __init__(
        self, job: Job, *, interval: float = 0.2, max_batch: int = 500, on_tick: Callable[[], None] | None = None
    ):
        self.job = job
        self.interval = interval
        self.max_batch = max_batch
        self.on_tick = on_tick
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._steps: dict[int, dict] = {}
        self._artifacts: list[Artifact] = []
        self._host_keys: list[tuple[int, str, str]] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._broadcaster: Broadcaster | None = None
        self.flushes = 0
        self.error: BaseException | None = None

    # producers (any thread, cheap) --------------------------------------------------------------------------------
    def event(
        self,
        message: str,
        *,
        level: str = EventLevel.INFO,
        hostname: str = "",
        step: str = "",
        data: dict | None = None,
        at_once: bool = False,
    ) -> None:
        with self._lock:
            self._events.append(
                {
                    "level": level,
                    "message": message,
                    "hostname": hostname,
                    "step": step,
                    "data": data or {},
                    "t": time.time(),
                }
            )
            size = len(self._events)
        if at_once or size >= self.max_batch:
            self._wake.set()

    def step(self, step_pk: int, **fields) -> None:
        with self._lock:
            self._steps.setdefault(step_pk, {}).update(fields)

    def artifact(self, step_pk: int, stream: str, data: bytes, size: int, cap: int) -> None:
        row = Artifact(
            step_id=step_pk,
            stream=stream,
            content=compress(data),
            size_bytes=size,
            stored_bytes=len(data),
            cap_bytes=cap,
        )
        with self._lock:
            self._artifacts.append(row)

    def host_key(self, node_id: int, public_key: str, fingerprint: str) -> None:
        with self._lock:
            self._host_keys.append((node_id, public_key, fingerprint))

    # the writer -----------------------------------------------------------------------------------------------------
    def start(self) -> "Recorder":
        # A new thread starts with an empty context: the log bridge never feeds the recorder its own records.
        self._thread = threading.Thread(target=self._run, name=f"job-recorder-{self.job.pk}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        # Without a thread, or for what arrived after it stopped (a kind's shard_finished logging through the
        # bridge, say): written here, so nothing recorded is ever left behind.
        self.flush()

    def _run(self) -> None:
        self._broadcaster = Broadcaster()
        try:
            # Flushes keep a fixed period (a flush's own write does not push the next one back), so an event waits
            # at most `interval` for its batch; a full batch or close() flushes at once.
            deadline = time.monotonic() + self.interval
            while True:
                self._wake.wait(max(0.0, deadline - time.monotonic()))
                self._wake.clear()
                now = time.monotonic()
                if now >= deadline:
                    deadline += self.interval
                    if deadline <= now:
                        deadline = now + self.interval
                stopping = self._stop.is_set()
                self.flush()
                if stopping:
                    return
                if self.on_tick is not None:
                    try:
                        self.on_tick()
                    except Exception:
                        logger.exception("job %s: recorder tick failed", self.job.pk)
        finally:
            self._broadcaster.close()
            self._broadcaster = None
            connection.close()

    def flush(self) -> None:
        with self._lock:
            events, self._events = self._events, []
            steps, self._steps = self._steps, {}
            artifacts, self._artifacts = self._artifacts, []
            host_keys, self._host_keys = self._host_keys, []
        if not (events or steps or artifacts or host_keys):
            return
        try:
            if threading.current_thread() is self._thread:
                close_old_connections()  # the recorder's own connection (never the caller's, maybe mid-transaction)
            rows, changed = self._write(events, steps, artifacts, host_keys)
        except Exception as error:  # keep the batch and try again on the next tick
            logger.exception("job %s: writing %d events failed", self.job.pk, len(events))
            self.error = error
            with self._lock:
                self._events[:0] = events
                for pk, fields in steps.items():
                    self._steps[pk] = {**fields, **self._steps.get(pk, {})}
                self._artifacts[:0] = artifacts
                self._host_keys[:0] = host_keys
            return
        self.flushes += 1
        if rows:
            self.job.last_seq = rows[-1].seq
        broadcast(self.job, events=rows, steps=changed, status=bool(changed), broadcaster=self._broadcaster)

    def _write(self, events, steps, artifacts, host_keys):
        now = timezone.now()
        with transaction.atomic():
            rows = append_events(self.job.pk, events)
            changed: list[JobStep] = []
            if steps:
                _update_steps(steps, now)
                changed = list(JobStep.objects.filter(pk__in=steps.keys()).only(*_STEP_DICT_FIELDS))
            if artifacts:
                for artifact in artifacts:
                    artifact.created = artifact.updated = now
                _insert_rows(artifacts)
            for node_id, public_key, fingerprint in host_keys:
                _record_pending_host_key(node_id, public_key, fingerprint)
        return rows, changed


_STEP_DICT_FIELDS = ("hostname", "step", "status", "exit_code", "summary", "started", "finished")


def _update_steps(steps: dict[int, dict], now) -> None:
    """Write cell changes as one `UPDATE ... WHERE id = ?` statement per set of fields, run with executemany.

    (QuerySet.bulk_update builds a CASE WHEN expression per row and field: at 500 cells a flush that cost more CPU
    than the SSH connections themselves.)
    """
    meta = JobStep._meta
    quote = connection.ops.quote_name
    groups: dict[tuple[str, ...], list[tuple[int, dict]]] = {}
    for pk, fields in steps.items():
        fields = {**fields, "updated": now}
        groups.setdefault(tuple(sorted(fields)), []).append((pk, fields))
    with connection.cursor() as cursor:
        for names, items in groups.items():
            columns = [meta.get_field(name) for name in names]
            sql = (
                f"UPDATE {quote(meta.db_table)} SET "
                + ", ".join(f"{quote(field.column)} = %s" for field in columns)
                + f" WHERE {quote(meta.pk.column)} = %s"
            )
            cursor.executemany(
                sql,
                [
                    [field.get_db_prep_save(_plain(values[field.name]), connection) for field in columns] + [pk]
                    for pk, values in items
                ],
            )


def _plain(value):
    return value.value if isinstance(value, enum.Enum) else value


def _record_pending_host_key(node_id: int, public_key: str, fingerprint: str) -> None:
    """Keep a key a node presented so an operator can trust it on the node page; never trusts anything itself."""
    from apps.inventory.choices import HostKeyState
    from apps.inventory.models import SshHostKey

    if not SshHostKey.objects.filter(node_id=node_id, fingerprint=fingerprint).exists():
        SshHostKey.objects.create(
            node_id=node_id, public_key=public_key, fingerprint=fingerprint, state=HostKeyState.PENDING
        )


# --- Python logging inside a job becomes events ------------------------------------------------------------------

current_recorder: contextvars.ContextVar[tuple[Recorder, str] | None] = contextvars.ContextVar(
    "rackpilot_job_recorder", default=None
)
_LEVELS = {logging.DEBUG: EventLevel.DEBUG, logging.INFO: EventLevel.INFO, logging.WARNING: EventLevel.WARNING}


class JobLogHandler(logging.Handler):
    """Records of project loggers (apps.*, rackpilot.*) emitted while a job runs become events of that job."""

    def emit(self, record: logging.LogRecord) -> None:
        current = current_recorder.get()
        if current is None or not record.name.startswith(("apps.", "rackpilot.")) or record.name == __name__:
            return
        recorder, hostname = current
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            fallback = EventLevel.ERROR if record.levelno >= logging.ERROR else EventLevel.INFO
            level = _LEVELS.get(record.levelno, fallback)
            recorder.event(
                message, level=level, hostname=getattr(record, "hostname", hostname), data={"logger": record.name}
            )
        except Exception:
            self.handleError(record)


_bridge = JobLogHandler(level=logging.INFO)


def install_log_bridge() -> None:
    root = logging.getLogger()
    if _bridge not in root.handlers:
        root.addHandler(_bridge)


__all__ = ["JobStatus", "Recorder", "append_events", "broadcast", "emit", "job_group", "progress_of"]
