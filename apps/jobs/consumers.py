"""Websockets: one job's events (replay from ?after=<seq>, then live) and the status stream of the job list."""

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.accounts.choices import Role
from apps.jobs.choices import StepStatus
from apps.jobs.events import LIST_GROUP, event_dict, job_group, job_status_dict, register_server_loop, step_dict
from apps.jobs.models import Job, JobEvent, JobStep

REPLAY_CHUNK = 1000
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


def _may_watch(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_role(Role.VIEWER))


class JobEventsConsumer(AsyncJsonWebsocketConsumer):
    """ws/jobs/<public_id>/?after=<seq>: every event after `seq` from the database, then live batches, in order.

    Frames: {"type": "state", "job": ..., "steps": [...]}, then {"type": "batch", "events": [...], "steps": [...],
    "job": ...}. Events arrive with consecutive seq numbers; a gap in a pushed batch is refilled from the database.
    """

    async def connect(self):
        user = self.scope.get("user")
        if not (user and user.is_authenticated):
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not _may_watch(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        public_id = str(self.scope["url_route"]["kwargs"]["public_id"])
        self.job = await self._job(user, public_id)
        if self.job is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_sent = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_sent = 0
        register_server_loop(asyncio.get_running_loop())
        self.group = job_group(public_id)
        # Join before reading the database, so nothing written in between is missed (duplicates are dropped).
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        state, steps = await self._snapshot()
        await self.send_json({"type": "state", "job": state, "steps": steps})
        await self._replay(upto=None)

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        # {"type": "resync", "after": n}: the client saw a gap; send everything after n again.
        if isinstance(content, dict) and content.get("type") == "resync":
            try:
                self.last_sent = max(0, int(content.get("after", 0)))
            except (TypeError, ValueError):
                return
            await self._replay(upto=None)

    async def job_batch(self, message):
        events = [e for e in message.get("events", []) if e["seq"] > self.last_sent]
        if events and events[0]["seq"] > self.last_sent + 1:
            await self._replay(upto=events[0]["seq"] - 1)
            events = [e for e in events if e["seq"] > self.last_sent]
        if events:
            self.last_sent = events[-1]["seq"]
        if events or message.get("steps") or message.get("job"):
            await self.send_json(
                {"type": "batch", "events": events, "steps": message.get("steps", []), "job": message.get("job")}
            )

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


class JobListConsumer(AsyncJsonWebsocketConsumer):
    """ws/jobs/: a status line whenever a job changes state or progress."""

    async def connect(self):
        user = self.scope.get("user")
        if not (user and user.is_authenticated):
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not _may_watch(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        register_server_loop(asyncio.get_running_loop())
        self.joined = True
        await self.channel_layer.group_add(LIST_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(LIST_GROUP, self.channel_name)

    async def jobs_status(self, message):
        await self.send_json({"type": "status", "job": message["job"]})

    async def job_batch(self, message):  # not subscribed; present so a stray message never closes the socket
        return None
