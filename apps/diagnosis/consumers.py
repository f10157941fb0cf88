"""ws/incidents/<public_id>/: what the incident's runbook records, as it is committed (apps/diagnosis/live.py).

Frames: {"type": "hello", "state": ..., "last_seq": ...} once joined, then each pushed frame as it came
({"type": "evidence" | "ranking" | "state" | "remediation", ...}). Who may watch, and the close codes, are the job
streams' (docs/jobs.md): anonymous 4401, no role 4403, no such incident 4404, no channel layer 4503.
"""

import asyncio

from channels.db import database_sync_to_async

from apps.diagnosis.live import incident_group
from apps.diagnosis.models import Incident
from apps.jobs.consumers import CLOSE_NOT_FOUND, GroupConsumer
from apps.jobs.events import register_server_loop


class IncidentConsumer(GroupConsumer):
    async def connect(self):
        if not await self.admit():
            return
        public_id = str(self.scope["url_route"]["kwargs"]["public_id"])
        incident = await self._incident(public_id)
        if incident is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        register_server_loop(asyncio.get_running_loop())
        if not await self.join(incident_group(public_id)):
            return
        await self.accept()
        # Read after joining: whatever the page missed before is older than this, and the page refreshes on it.
        incident = await self._incident(public_id)
        await self.send_json({"type": "hello", "state": incident.state, "last_seq": incident.last_seq})

    async def incident_update(self, message):
        await self.send_json(message["frame"])

    async def receive_json(self, content, **kwargs):  # the page sends nothing; anything it does send is ignored
        return None

    @database_sync_to_async
    def _incident(self, public_id):
        return Incident.objects.filter(public_id=public_id).only("pk", "state", "last_seq", "public_id").first()
