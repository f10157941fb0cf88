"""Websockets: one job's events (replay from ?after=<seq>, then live) and the status stream of the job list."""

import asyncio
import contextlib
import json
import logging
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.accounts.choices import Role
from apps.jobs.choices import StepStatus
from apps.jobs.events import LIST_GROUP, event_dict, job_group, job_status_dict, register_server_loop, step_dict
from apps.jobs.models import Job, JobEvent, JobStep

REPLAY_CHUNK = 1000
# Close codes (docs/jobs.md). A refused socket is accepted first and then closed with the code: a socket closed
# before accept reaches the browser as a failed handshake (1006), and the page could not say why.
CLOSE_ORIGIN = 4400  # sent by portal.asgi's origin check
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = 4503  # the channel layer (Redis) is unreachable; the page polls REST and retries

log = logging.getLogger(__name__)


def _layer_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (OSError, asyncio.TimeoutError)
    try:
        from redis.exceptions import RedisError
    except ImportError:  # the embedded wiring's in-memory layer needs no redis
        return errors
    return (*errors, RedisError)


# What a channel layer raises when its backend is down (redis-py's ConnectionError/TimeoutError, socket errors).
LAYER_ERRORS = _layer_errors()
# What its receive raises when Redis goes away under an open socket: redis-py's errors only (a client gone away
# mid-send is an OSError too, and is no outage).
LAYER_LOST = tuple(error for error in LAYER_ERRORS if not issubclass(error, (OSError, asyncio.TimeoutError)))


def _may_watch(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_role(Role.VIEWER))


class GroupConsumer(AsyncJsonWebsocketConsumer):
    """A stream of one Channels group (a job's, the job list's, an incident's): who may watch, joining and leaving
    the group, and the close codes the pages read."""

    joined: str | None = None

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        except LAYER_LOST as error:
            # Redis went away under an open socket (its receive failed): close with the code the page reads as
            # "poll REST and reconnect" rather than end in a server error (1011) that says nothing.
            log.warning("websocket closed: the channel layer is unreachable (%s)", type(error).__name__)
            with contextlib.suppress(Exception):
                await self.base_send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE})

    async def dispatch(self, message):
        """Channels' dispatch without its close_old_connections() before every message: that is a hop to the one
        sync thread for each batch and watcher (2,000 a second at 1,000 events/s to 200 clients), while a batch
        that follows touches no database, and every handler that does goes through database_sync_to_async, which
        closes old connections itself."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def admit(self) -> bool:
        """A signed-in, active user with a role that may watch; otherwise the socket is closed with the reason."""
        user = self.scope.get("user")
        if not (user and user.is_authenticated):
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return False
        if not _may_watch(user):
            await self.refuse(CLOSE_FORBIDDEN)
            return False
        return True

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def join(self, group: str) -> bool:
        """group_add, or False (socket closed with CLOSE_UNAVAILABLE) when the channel layer is unreachable."""
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except LAYER_ERRORS as error:
            log.warning("websocket refused: the channel layer is unreachable (%s)", type(error).__name__)
            await self.refuse(CLOSE_UNAVAILABLE)
            return False
        self.joined = group
        return True

    async def disconnect(self, code):
        if self.joined:
            # Redis down: the layer forgets the membership itself (group_expiry).
            with contextlib.suppress(*LAYER_ERRORS):
                await self.channel_layer.group_discard(self.joined, self.channel_name)


class JobEventsConsumer(GroupConsumer):
    """ws/jobs/<public_id>/?after=<seq>: every event after `seq` from the database, then live batches, in order.

    Frames: {"type": "state", "job": ..., "steps": [...]}, then {"type": "batch", "events": [...], "steps": [...],
    "job": ...}. Events arrive with consecutive seq numbers; a gap in a pushed batch is refilled from the database.
    """

    async def connect(self):
        if not await self.admit():
            return
        user = self.scope["user"]
        public_id = str(self.scope["url_route"]["kwargs"]["public_id"])
        self.job = await self._job(user, public_id)
        if self.job is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_sent = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_sent = 0
        register_server_loop(asyncio.get_running_loop())
        # Join before reading the database, so nothing written in between is missed (duplicates are dropped).
        if not await self.join(job_group(public_id)):
            return
        await self.accept()
        state, steps = await self._snapshot()
        await self.send_json({"type": "state", "job": state, "steps": steps})
        await self._replay(upto=None)

    async def receive_json(self, content, **kwargs):
        # {"type": "resync", "after": n}: the client saw a gap; send everything after n again.
        if isinstance(content, dict) and content.get("type") == "resync":
            try:
                self.last_sent = max(0, int(content.get("after", 0)))
            except (TypeError, ValueError):
                return
            await self._replay(upto=None)

    async def job_batch(self, message):
        """One batch (events.batch_message): its frame as it came when it follows what the client has."""
        first, last = message["first"], message["last"]
        if first is not None and first > self.last_sent + 1:  # the layer dropped a batch: refill from the database
            await self._replay(upto=first - 1)
        if first is None or first == self.last_sent + 1:
            self.last_sent = last or self.last_sent
            await self.send(text_data=message["frame"])
            return
        # The client has some of these events already (a replay overlapped the live stream): only the new ones.
        frame = json.loads(message["frame"])
        frame["events"] = [e for e in frame["events"] if e["seq"] > self.last_sent]
        if frame["events"]:
            self.last_sent = frame["events"][-1]["seq"]
        if frame["events"] or frame["steps"] or frame["job"]:
            await self.send_json(frame)

    async def _replay(self, *, upto: int | None):
        while True:
            events = await self._events(self.last_sent, upto)
            if not events:
                return
            self.last_sent = events[-1]["seq"]
            await self.send_json({"type": "batch", "events": events, "steps": [], "job": None})
            if len(events) < REPLAY_CHUNK:
                return

    @database_sync_to_async
    def _job(self, user, public_id):
        return Job.objects.visible_to(user).filter(public_id=public_id).first()

    @database_sync_to_async
    def _snapshot(self):
        job = Job.objects.get(pk=self.job.pk)
        steps = [step_dict(s) for s in JobStep.objects.filter(job=job).exclude(status=StepStatus.PENDING)]
        return job_status_dict(job), steps

    @database_sync_to_async
    def _events(self, after: int, upto: int | None):
        events = JobEvent.objects.filter(job_id=self.job.pk, seq__gt=after).order_by("seq")
        if upto is not None:
            events = events.filter(seq__lte=upto)
        return [event_dict(e) for e in events[:REPLAY_CHUNK]]


class JobListConsumer(GroupConsumer):
    """ws/jobs/: a status line whenever a job changes state or progress."""

    async def connect(self):
        if not await self.admit():
            return
        register_server_loop(asyncio.get_running_loop())
        if await self.join(LIST_GROUP):
            await self.accept()

    async def jobs_status(self, message):
        await self.send_json({"type": "status", "job": message["job"]})

    async def job_batch(self, message):  # not subscribed; present so a stray message never closes the socket
        return None
