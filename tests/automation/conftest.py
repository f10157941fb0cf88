import pytest

from apps.automation import notifications
from apps.jobs import services as jobs
from tests.factories import make_node, make_rack


@pytest.fixture(autouse=True)
def no_celery(monkeypatch):
    """Jobs are recorded, not run; deliveries are queued into a list the test runs itself (deliver_all)."""
    queued = []
    monkeypatch.setattr(jobs, "enqueue", lambda job: None)
    monkeypatch.setattr(
        notifications, "enqueue_delivery", lambda delivery_id, countdown=0: queued.append((delivery_id, countdown))
    )
    return queued


@pytest.fixture
def deliver_all(no_celery):
    def run() -> list[str]:
        done = []
        while no_celery:
            delivery_id, _ = no_celery.pop(0)
            done.append(notifications.deliver(delivery_id=delivery_id))
        return done

    return run


@pytest.fixture
def rack_of_nodes(db):
    rack = make_rack(name="r04")
    return rack, [make_node(hostname=f"gpu{n:03d}", rack=rack) for n in range(1, 4)]


@pytest.fixture
def scan(django_capture_on_commit_callbacks):
    """notifications.scan_events(), its on-commit sends run as a commit would run them."""

    def run() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            return notifications.scan_events()

    return run
