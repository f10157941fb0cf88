"""The Redis channel layer in the services wiring: a websocket that waits longer than channels-redis's 5 s blocking
receive must keep waiting, not fail and reconnect (redis-py 8's socket timeout breaks that, hence `redis<8`)."""

import asyncio
import os
import time

import pytest
from channels_redis.core import RedisChannelLayer

pytestmark = pytest.mark.integration

REDIS = os.environ.get("RACKPILOT_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


def test_an_idle_receive_outlives_the_blocking_pop():
    import redis

    try:
        redis.Redis.from_url(REDIS).ping()
    except Exception as error:
        if os.environ.get("CI"):
            pytest.fail(f"Redis at {REDIS} is down: {error}")
        pytest.skip(f"Redis at {REDIS} is down: {error}")

    async def idle_then_message() -> tuple[float, dict]:
        layer = RedisChannelLayer(hosts=[REDIS])
        channel = await layer.new_channel()
        started = time.monotonic()

        async def later():
            await asyncio.sleep(7)
            await layer.send(channel, {"type": "job.events", "seq": 1})

        sender = asyncio.ensure_future(later())
        message = await asyncio.wait_for(layer.receive(channel), 15)
        await sender
        await layer.flush()
        return time.monotonic() - started, message

    waited, message = asyncio.run(idle_then_message())
    assert message["seq"] == 1 and waited >= 7
