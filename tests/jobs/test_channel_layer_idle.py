"""The Redis channel layer in the services wiring: a websocket that waits longer than channels-redis's 5 s blocking
receive must keep waiting, not fail and reconnect (redis-py 8's socket timeout breaks that, hence `redis<8`)."""

import asyncio
import time

import pytest
from channels_redis.core import RedisChannelLayer

from tests.redis_server import REDIS, redis_or_skip

pytestmark = pytest.mark.integration


def test_an_idle_receive_outlives_the_blocking_pop():
    redis_or_skip()

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
