"""A real uvicorn against the PostgreSQL test database: requests do not leave database connections behind.

Under ASGI each request's sync code may run on another thread; with persistent connections (CONN_MAX_AGE > 0)
every such thread kept its own connection open (40 requests: 10 -> 50 connections, still 50 a minute later).
"""

import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from apps.accounts.choices import Role
from tests import factories
from tests.nodeexec.sshd import free_port

pytestmark = [pytest.mark.integration, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    s = connection.settings_dict
    auth = f"{quote(s['USER'])}:{quote(s['PASSWORD'])}@" if s["USER"] else ""
    return f"postgres://{auth}{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


def _connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [connection.settings_dict["NAME"]],
        )
        return cursor.fetchone()[0]


def _get(port: int, path: str, token: str) -> int:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        client.request("GET", path, headers={"Authorization": f"Token {token}", "Host": "127.0.0.1"})
        response = client.getresponse()
        response.read()
        return response.status
    finally:
        client.close()


def _wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.fixture
def uvicorn(db, tmp_path):
    assert connection.vendor == "postgresql"  # the marker leaves this test out of SQLite runs
    port = free_port()
    log = tmp_path / "uvicorn.log"
    env = dict(
        os.environ,
        DATABASE_URL=_database_url(),
        RACKPILOT_SECRET_KEY="integration-test",
        RACKPILOT_VAR_DIR=str(tmp_path / "var"),
        PYTHONPATH=str(ROOT),
    )
    env.pop("REDIS_URL", None)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/login/")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"uvicorn did not start: {log.read_text()}")
                time.sleep(0.2)
        yield port, log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_forty_requests_leave_no_database_connections_behind(uvicorn):
    port, log = uvicorn
    token = factories.make_token(factories.make_user(role=Role.VIEWER, username="counter"))
    factories.make_node(hostname="c1")
    assert _get(port, "/api/nodes/?limit=1", token) == 200, log.read_text()
    before = _connections()
    statuses = [_get(port, "/api/nodes/?limit=1", token) for _ in range(40)]
    assert statuses == [200] * 40, log.read_text()
    during = _connections()
    assert during <= before + 2, f"{before} connections before 40 requests, {during} after"
    assert _wait(lambda: _connections() <= before, 10), f"{before} before, still {_connections()} after 10 s idle"
