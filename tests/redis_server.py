"""The Redis that integration tests use: a database of its own; down means skip here, fail in CI."""

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.waits import until
from tests.workers import worker_index


def _per_worker(url: str) -> str:
    """Each pytest-xdist worker gets the database below the previous one's: tests flush it and run workers on it."""
    parts = urlsplit(url)
    database = int(parts.path.lstrip("/") or 0) - worker_index()
    if database < 0:
        raise pytest.UsageError(f"RACKPILOT_TEST_REDIS_URL {url}: too few Redis databases below it for the workers")
    return urlunsplit(parts._replace(path=f"/{database}"))


REDIS = _per_worker(os.environ.get("RACKPILOT_TEST_REDIS_URL", "redis://127.0.0.1:6379/14"))


def redis_or_skip(*, flush: bool = False) -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS).ping()
    except Exception as error:
        if os.environ.get("CI"):
            pytest.fail(f"Redis at {REDIS} is down: {error}")
        pytest.skip(f"Redis at {REDIS} is down: {error}")
    if flush:
        redis.Redis.from_url(REDIS).flushdb()
    return REDIS


class PrivateRedis:
    """A redis-server of the test's own on a free port (never the shared one), which the test may stop and restart.

    Missing redis-server means skip here, fail in CI.
    """

    def __init__(self, root, *, port: int | None = None, persistent: bool = False):
        """`persistent`: append-only file in `root`, as docker/compose.yaml runs Redis (queued messages survive)."""
        import shutil
        import socket

        self.binary = shutil.which("redis-server")
        if self.binary is None:
            if os.environ.get("CI"):
                pytest.fail("redis-server is not installed")
            pytest.skip("redis-server is not installed")
        if port is None:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
        self.root = root
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process = None
        if persistent:
            self.persistence = ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            self.persistence = ["--appendonly", "no"]

    def start(self) -> "PrivateRedis":
        import subprocess

        import redis

        with open(self.root / f"redis-{self.port}.log", "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *self.persistence],
                cwd=self.root,  # Redis's --dir defaults to its working directory
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def answers() -> bool:
            try:
                return redis.Redis.from_url(self.url).ping()
            except redis.ConnectionError:
                return False

        until(answers, what=f"redis-server on port {self.port}", exited=lambda: self.process.poll() is not None)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
