"""The Redis that integration tests use: a database of its own; down means skip here, fail in CI."""

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

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
