import pytest

from apps.jobs import services


@pytest.fixture(autouse=True)
def no_celery(monkeypatch, request):
    """Unit tests run shards in-process (run_shards); integration tests send them to a real worker."""
    if request.node.get_closest_marker("integration"):
        return []
    sent = []
    monkeypatch.setattr(services, "enqueue", lambda job: sent.append(job.public_id))
    monkeypatch.setattr(services, "enqueue_rerun", lambda job, shard: sent.append((job.public_id, shard.index)))
    return sent


@pytest.fixture
def fast_jobs(settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS = 0.1
    settings.RACKPILOT_JOB_KILL_GRACE_SECONDS = 1
    settings.RACKPILOT_JOB_DEFAULT_TRANSPORT = "local"
    return settings
