import pytest

from apps.jobs import services
from apps.nodeexec.sim import get_simulator, register_simulator


@pytest.fixture(autouse=True)
def no_celery(monkeypatch):
    """Shards run in-process (run_shards), as in tests/jobs."""
    sent = []
    monkeypatch.setattr(services, "enqueue", lambda job: sent.append(job.public_id))
    return sent


@pytest.fixture
def fast_jobs(settings):
    settings.RACKPILOT_EVENT_FLUSH_MS = 50
    settings.RACKPILOT_JOB_CANCEL_POLL_SECONDS = 0.1
    return settings


@pytest.fixture
def simulator():
    """apps.simulator registers its backend in ready(); install it here too if that has not happened."""
    backend = get_simulator()
    if backend is None:
        from apps.simulator.backend import SimulatorBackend

        backend = SimulatorBackend(seed=0)
        register_simulator(backend)
    return backend
