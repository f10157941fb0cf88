"""A live portal for tests that talk to it over HTTP as a client would: uvicorn in a subprocess on the test
database (embedded wiring, worker inside), plus the skip-here-fail-in-CI rule for what a host may lack."""

import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from tests.waits import listening, until

ROOT = Path(__file__).resolve().parents[1]


def need(condition, message):
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = f"{quote(s['USER'])}:{quote(s['PASSWORD'])}@" if s["USER"] else ""
    return f"postgres://{auth}{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture
def live_server_env():
    """Settings of the live server beyond the defaults below; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def live_server_url(request, transactional_db, tmp_path, live_server_env):
    """uvicorn serving the project (embedded wiring, worker inside) on the test database. Its log is shown with a
    failure (tests/conftest.py)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        DATABASE_URL=_database_url(),
        PYTHONPATH=str(ROOT),
        RACKPILOT_VAR_DIR=str(tmp_path),
        RACKPILOT_JOB_DEFAULT_TRANSPORT="local",
        RACKPILOT_EVENT_FLUSH_MS="100",
        RACKPILOT_ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    env.update(live_server_env)
    request.node.live_server_log = tmp_path / "server.log"
    log = open(tmp_path / "server.log", "ab")  # noqa: SIM115  (the server writes to it after this returns)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "tests.live_asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        until(lambda: listening("127.0.0.1", port), what="uvicorn", exited=lambda: server.poll() is not None)
    except RuntimeError as error:
        server.kill()
        raise RuntimeError(f"{error}\n{(tmp_path / 'server.log').read_text()[-4000:]}") from None
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
