"""The job websockets through the real ASGI app (origin check, session auth): replay, live, no duplicates."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client

from apps.jobs import services
from apps.jobs.events import append_events, batch_message, broadcast, job_group
from apps.jobs.models import JobEvent
from portal.asgi import application
from tests import factories
from tests.sockets import WAIT

# Websockets over whichever channel layer the wiring has: in memory or Redis (wirings).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.wirings]


@pytest.fixture
def job(db, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda job: None)
    node = factories.make_node(hostname="ws1")
    return services.create_job(
        kind="sleep", targets=services.TargetSpec(nodes=(node.hostname,)), parameters={"seconds": 1}, transport="local"
    )


def _headers(user=None, origin="http://127.0.0.1", host="127.0.0.1"):
    headers = [(b"origin", origin.encode()), (b"host", host.encode())]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


async def _connect(path, headers, **scope):
    communicator = WebsocketCommunicator(application, path, headers=headers)
    communicator.scope.update(scope)
    connected, code = await communicator.connect(timeout=WAIT)
    return communicator, connected, code


async def _close_code(path, headers, **scope):
    """The code a refused socket is closed with, as the browser sees it: accepted first, then closed."""
    communicator, connected, code = await _connect(path, headers, **scope)
    assert connected, f"closed before accept (code {code}): the browser would only see a failed handshake"
    message = await communicator.receive_output(timeout=WAIT)
    assert message["type"] == "websocket.close", message
    return message["code"]


async def _drain(communicator, quiet=0.5):
    """Every frame until the socket stays quiet for `quiet` seconds."""
    frames = []
    while not await communicator.receive_nothing(timeout=quiet):
        frames.append(await communicator.receive_json_from(timeout=WAIT))
    return frames


def _seqs(frames):
    return [e["seq"] for f in frames if f["type"] == "batch" for e in f["events"]]


def test_anonymous_is_refused_with_a_code_the_page_can_read(job):
    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", _headers()) == 4401
        assert await _close_code("/ws/jobs/", _headers()) == 4401

    async_to_sync(go)()


def test_foreign_origin_is_refused(job, viewer):
    headers = _headers(viewer, "http://evil.example")

    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", headers) == 4400

    async_to_sync(go)()


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:9999",  # same host, another port
        "https://127.0.0.1:8200",  # same host and port, another scheme
        "http://127.0.0.1",  # the default port is another port
        "http://localhost:8200",  # another host name for the same machine is another origin
        "null",
    ],
)
def test_same_host_on_another_port_or_scheme_is_refused(job, viewer, origin):
    headers = _headers(viewer, origin, host="127.0.0.1:8200")

    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", headers) == 4400
        assert await _close_code("/ws/jobs/", headers) == 4400

    async_to_sync(go)()


def test_a_missing_origin_is_refused(job, viewer):
    headers = [h for h in _headers(viewer, host="127.0.0.1:8200") if h[0] != b"origin"]

    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", headers) == 4400

    async_to_sync(go)()


def test_the_portals_own_origin_is_accepted_with_its_port_and_scheme(job, viewer):
    cases = [
        ("http://127.0.0.1:8200", "127.0.0.1:8200", "ws"),
        ("https://127.0.0.1:8443", "127.0.0.1:8443", "wss"),
        ("https://localhost", "localhost", "wss"),
        ("https://localhost:443", "localhost", "wss"),
    ]
    cases = [(_headers(viewer, origin, host=host), scheme) for origin, host, scheme in cases]

    async def go():
        for headers, scheme in cases:
            communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", headers, scheme=scheme)
            assert connected, (headers, scheme)
            assert (await communicator.receive_json_from(timeout=WAIT))["type"] == "state"
            await communicator.disconnect()

    async_to_sync(go)()


def test_a_host_outside_allowed_hosts_is_refused_even_with_a_matching_origin(job, viewer):
    headers = _headers(viewer, "http://evil.example:8200", host="evil.example:8200")

    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", headers) == 4400

    async_to_sync(go)()


def test_an_origin_listed_in_rackpilot_allowed_origins_is_accepted(job, viewer, settings):
    settings.RACKPILOT_ALLOWED_ORIGINS = ["https://portal.example.org"]
    listed = _headers(viewer, "https://portal.example.org", host="127.0.0.1:8200")
    other_port = _headers(viewer, "https://portal.example.org:8443", host="127.0.0.1:8200")

    async def go():
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", listed)
        assert connected
        await communicator.disconnect()
        assert await _close_code(f"/ws/jobs/{job.public_id}/", other_port) == 4400

    async_to_sync(go)()


def test_unknown_job_is_refused(job, viewer):
    headers = _headers(viewer)

    async def go():
        assert await _close_code("/ws/jobs/00000000-0000-0000-0000-000000000000/", headers) == 4404

    async_to_sync(go)()


def test_a_channel_layer_outage_closes_the_handshake_with_4503_instead_of_an_error(job, viewer, settings, tmp_path):
    """Redis down (a Redis of the test's own, stopped): the consumer cannot join its group. The socket is closed
    with 4503 (the page then polls REST and retries) instead of the handshake failing with a server error."""
    from tests.redis_server import PrivateRedis

    redis = PrivateRedis(tmp_path).start()
    redis.stop()
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis.url]}}
    }
    headers = _headers(viewer)

    async def go():
        assert await _close_code(f"/ws/jobs/{job.public_id}/", headers) == 4503
        assert await _close_code("/ws/jobs/", headers) == 4503

    async_to_sync(go)()


def test_a_channel_layer_lost_under_an_open_socket_closes_it_with_4503(job, viewer, settings, tmp_path):
    """Redis stops while a client watches (a Redis of the test's own): the socket is closed with 4503, which the
    page reads as "poll and reconnect", instead of the consumer ending in a server error."""
    from tests.redis_server import PrivateRedis

    redis = PrivateRedis(tmp_path).start()
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis.url]}}
    }
    headers = _headers(viewer)

    async def go():
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", headers)
        assert connected
        await _drain(communicator)
        redis.stop()
        message = await communicator.receive_output(timeout=WAIT)
        assert message == {"type": "websocket.close", "code": 4503}

    try:
        async_to_sync(go)()
    finally:
        redis.stop()


def test_a_batch_that_follows_is_sent_as_serialised_once_and_steps_only_frames_pass(job, viewer):
    """The frame is encoded once in the group message (for every watcher) and sent as it is."""
    headers = _headers(viewer)

    async def go():
        from channels.db import database_sync_to_async

        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/", headers)
        assert connected
        await _drain(communicator)
        rows = await database_sync_to_async(append_events)(job.pk, [{"message": "a"}, {"message": "b"}])
        message = batch_message(rows)
        await get_channel_layer().group_send(job_group(job.public_id), message)
        assert await communicator.receive_from(timeout=WAIT) == message["frame"]
        steps_only = batch_message([], state={"id": str(job.public_id), "status": "running"})
        await get_channel_layer().group_send(job_group(job.public_id), steps_only)
        assert await communicator.receive_json_from(timeout=WAIT) == {
            "type": "batch",
            "events": [],
            "steps": [],
            "job": {"id": str(job.public_id), "status": "running"},
        }
        # Seen already (as after a replay): nothing is sent again.
        await get_channel_layer().group_send(job_group(job.public_id), message)
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()

    async_to_sync(go)()


def test_viewer_replays_after_seq_then_gets_live_batches_without_duplicates(job, viewer):
    append_events(job.pk, [{"message": f"old {i}"} for i in range(9)])  # seq 2..10
    headers = _headers(viewer)

    async def go():
        communicator, connected, _ = await _connect(f"/ws/jobs/{job.public_id}/?after=4", headers)
        assert connected
        state = await communicator.receive_json_from(timeout=WAIT)
        assert state["type"] == "state" and state["job"]["last_seq"] == 10
        frames = await _drain(communicator)
        assert _seqs(frames) == list(range(5, 11))
        # A live batch overlapping what was replayed: only the new ones come through, in order.
        from channels.db import database_sync_to_async

        rows = await database_sync_to_async(append_events)(job.pk, [{"message": "new a"}, {"message": "new b"}])
        overlap = await database_sync_to_async(lambda: list(JobEvent.objects.filter(job=job, seq__gte=9)))()
        await get_channel_layer().group_send(
            job_group(job.public_id),
            batch_message(overlap),
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
            batch_message(rows[3:]),
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
        frame = await communicator.receive_json_from(timeout=WAIT)
        assert frame["type"] == "status" and frame["job"]["id"] == str(job.public_id)
        assert frame["job"]["status"] == "queued" and frame["job"]["progress"]["total"] == 1
        await communicator.disconnect()

    async_to_sync(go)()
