"""The incident websocket through the real ASGI app: who may watch, and what the runbook records reaches the page."""

import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client

from apps.diagnosis import recording, services
from apps.diagnosis.choices import Cause, EvidenceVerdict, IncidentState
from apps.diagnosis.runbook import Observation
from apps.jobs import services as jobs
from portal.asgi import application
from tests import factories
from tests.sockets import WAIT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def incident(db, operator):
    node = factories.make_node(hostname="live1")
    return services.open_incident(user=operator, node=node, transport="sim")


def _headers(user=None):
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


async def _open(path, headers):
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=WAIT)
    assert connected, f"closed before accept (code {code})"
    return communicator


async def _close_code(path, headers):
    communicator = await _open(path, headers)
    message = await communicator.receive_output(timeout=WAIT)
    assert message["type"] == "websocket.close", message
    return message["code"]


async def _frames_until(communicator, last):
    """The frames up to and including the first one `last` accepts: their order and content, however loaded the
    machine (a quiet half second ended the reading before, and a one-second connect failed under load)."""
    frames = []
    while not frames or not last(frames[-1]):
        frames.append(await communicator.receive_json_from(timeout=WAIT))
    return frames


def test_anonymous_is_refused_and_an_unknown_incident_is_not_found(incident, viewer):
    anonymous, signed_in = _headers(), _headers(viewer)

    async def go():
        assert await _close_code(f"/ws/incidents/{incident.public_id}/", anonymous) == 4401
        assert await _close_code(f"/ws/incidents/{uuid.uuid4()}/", signed_in) == 4404

    async_to_sync(go)()


def test_an_inactive_user_is_refused(incident, make_user):
    user = make_user()
    headers = _headers(user)
    user.is_active = False
    user.save()

    async def go():
        assert await _close_code(f"/ws/incidents/{incident.public_id}/", headers) == 4401

    async_to_sync(go)()


def test_a_viewer_sees_evidence_the_ranking_and_the_state_as_the_runbook_records_them(incident, viewer, monkeypatch):
    monkeypatch.setattr(jobs, "enqueue", lambda job: None)
    job = jobs.create_job(kind="sleep", targets=jobs.TargetSpec(nodes=("live1",)), parameters={}, transport="local")
    pfc_off = Observation(
        "pfc", "ens1np0", EvidenceVerdict.FAULT, "PFC off on priority 3", "mlnx_qos -i ens1np0", hostname="live1"
    )

    def record():
        recording.record_observations(incident=incident, job=job, observations=[pfc_off], artifacts={})
        incident.state = IncidentState.CONCLUDED
        incident.save(update_fields=["state", "updated"])

    headers = _headers(viewer)

    async def go():
        communicator = await _open(f"/ws/incidents/{incident.public_id}/", headers)
        hello = await communicator.receive_json_from(timeout=WAIT)
        assert hello == {"type": "hello", "state": IncidentState.OPEN, "last_seq": 0}
        await database_sync_to_async(record)()
        frames = await _frames_until(communicator, lambda frame: frame["type"] == "state")
        await communicator.disconnect()
        return frames

    frames = async_to_sync(go)()
    by_type = {frame["type"]: frame for frame in frames}
    assert [row["summary"] for row in by_type["evidence"]["evidence"]] == ["PFC off on priority 3"]
    assert by_type["evidence"]["evidence"][0]["seq"] == incident.evidence.get().seq
    assert by_type["ranking"]["ranking"][0]["cause"] == Cause.PFC_OFF
    assert by_type["state"]["state"] == IncidentState.CONCLUDED
    assert {frame["incident"] for frame in frames} == {str(incident.public_id)}


def test_a_watcher_of_another_incident_hears_nothing(incident, viewer, operator):
    other = services.open_incident(user=operator, node=factories.make_node(hostname="live2"), transport="sim")

    def change():
        incident.state = IncidentState.UNRESOLVED
        incident.save(update_fields=["state", "updated"])
        # Then one on the watched incident: what arrives before its frame is what the watcher heard of the other.
        other.state = IncidentState.UNRESOLVED
        other.save(update_fields=["state", "updated"])

    headers = _headers(viewer)

    async def go():
        communicator = await _open(f"/ws/incidents/{other.public_id}/", headers)
        assert (await communicator.receive_json_from(timeout=WAIT))["type"] == "hello"
        await database_sync_to_async(change)()
        frames = await _frames_until(communicator, lambda frame: frame["type"] == "state")
        await communicator.disconnect()
        return frames

    assert [(frame["incident"], frame["type"]) for frame in async_to_sync(go)()] == [(str(other.public_id), "state")]
