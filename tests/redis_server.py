"""The Redis that integration tests use: a database of its own; down means skip here, fail in CI."""

import os

import pytest

REDIS = os.environ.get("RACKPILOT_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


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
