"""The job websockets through the real ASGI app (origin check, session auth): replay, live, no duplicates."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client

from apps.jobs import services
from apps.jobs.events import append_events, broadcast, event_dict, job_group
from apps.jobs.models import JobEvent
from portal.asgi import application
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def job(db, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    node = factories.make_node(hostname="ws1")
    return services.create_job(
        kind="sleep", targets=services.TargetSpec(nodes=(node.hostname,)), parameters={"seconds": 1}, transport="local"
    )


def _headers(user=None, origin="http://127.0.0.1"):
    headers = [(b"origin", origin.encode())]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


async def _connect(path, headers):
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def _drain(communicator, quiet=0.5):
    """Every frame until the socket stays quiet for `quiet` seconds."""
    frames = []
    while not await communicator.receive_nothing(timeout=quiet):
        frames.append(await communicator.receive_json_from(timeout=2))
    return frames


def _seqs(frames):
    return [e["seq"] for f in frames if f["type"] == "batch" for e in f["events"]]


def test_anonymous_is_refused(job):
    async def go():
        communicator, connected, code = await _connect(f"/ws/jobs/{job.public_id}/", _headers())
        assert not connected and code == 4401
        communicator, connected, code = await _connect("/ws/jobs/", _headers())
        assert not connected and code == 4401

    async_to_sync(go)()


def test_foreign_origin_is_refused(job, viewer):
    headers = _headers(viewer, "http://evil.example")

    async def go():
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", headers)
        assert not connected

    async_to_sync(go)()


def test_unknown_job_is_refused(job, viewer):
    headers = _headers(viewer)

    async def go():
        communicator, connected, code = await _connect("/ws/jobs/00000000-0000-0000-0000-000000000000/", headers)
        assert not connected and code == 4404

    async_to_sync(go)()


def test_viewer_replays_after_seq_then_gets_live_batches_without_duplicates(job, viewer):
    append_events(job.pk, [{"message": f"old {i}"} for i in range(9)])  # seq 2..10
    headers = _headers(viewer)

    async def go():
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/?after=4", headers)
        assert connected
        state = await communicator.receive_json_from(timeout=2)
        assert state["type"] == "state" and state["job"]["last_seq"] == 10
        frames = await _drain(communicator)
        assert _seqs(frames) == list(range(5, 11))
        # A live batch overlapping what was replayed: only the new ones come through, in order.
        from channels.db import database_sync_to_async

        rows = await database_sync_to_async(append_events)(job.pk, [{"message": "new a"}, {"message": "new b"}])
        overlap = await database_sync_to_async(lambda: list(JobEvent.objects.filter(job=job, seq__gte=9)))()
        await get_channel_layer().group_send(
            job_group(job.public_id),
            {"type": "job.batch", "events": [event_dict(e) for e in overlap], "steps": [], "job": None},
        )
        frames = await _drain(communicator)
        assert _seqs(frames) == [r.seq for r in rows] == [11, 12]
        await communicator.disconnect()

    async_to_sync(go)()


def test_a_gap_in_the_live_stream_is_refilled_from_the_database(job, operator):
    headers = _headers(operator)

    async def go():
        from channels.db import database_sync_to_async

        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", headers)
        assert connected
        await _drain(communicator)
        rows = await database_sync_to_async(append_events)(job.pk, [{"message": f"e{i}"} for i in range(5)])
        # The channel layer "lost" the first three: only the last two are pushed.
        await get_channel_layer().group_send(
            job_group(job.public_id),
            {"type": "job.batch", "events": [event_dict(e) for e in rows[3:]], "steps": [], "job": None},
        )
        frames = await _drain(communicator)
        assert _seqs(frames) == [2, 3, 4, 5, 6]
        await communicator.disconnect()

    async_to_sync(go)()


def test_job_list_stream_gets_status_lines(job, viewer):
    headers = _headers(viewer)

    async def go():
        from channels.db import database_sync_to_async

        communicator, connected, _ = await _connect("/ws/jobs/", headers)
        assert connected
        await database_sync_to_async(broadcast)(job)
        frame = await communicator.receive_json_from(timeout=2)
        assert frame["type"] == "status" and frame["job"]["id"] == str(job.public_id)
        assert frame["job"]["status"] == "queued" and frame["job"]["progress"]["total"] == 1
        await communicator.disconnect()

    async_to_sync(go)()
