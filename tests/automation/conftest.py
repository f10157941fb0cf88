import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


@pytest.fixture
def receiver():
    """A real HTTP server on 127.0.0.1 that keeps what it is sent and answers `status` (a list: one per request)."""
    got, answers = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append({"headers": dict(self.headers), "body": body, "path": self.path})
            self.send_response(answers.pop(0) if answers else 204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{server.server_port}/hook?x=1", "got": got, "answers": answers}
    server.shutdown()


@pytest.fixture
def allow_private(settings):
    settings.RACKPILOT_WEBHOOK_ALLOW_PRIVATE = True
    settings.RACKPILOT_WEBHOOK_RETRY_SECONDS = 1
    return settings
