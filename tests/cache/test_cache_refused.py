"""Redis refusing a cache command (WRONGTYPE, ...) is a miss or a skipped store, never a failed
call (review 2, item 3), and a store the index refuses leaves no entry outside the index.
Real gateway, real Redis, real upstream."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from gateway.state.embedded import RedisProcess
from gateway.telemetry import metrics
from tests.cache.conftest import PREFIX
from tests.cache.test_cache_flow import GET, invoke, output
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]

INDEX = f"{PREFIX}:{{cache:orders.get}}:index"


async def entry_keys(client: aioredis.Redis) -> list[bytes]:
    return [k async for k in client.scan_iter(match=f"{PREFIX}:{{cache:orders.get}}:e:*")]


async def test_a_non_sorted_set_at_the_index_key_skips_the_store_and_the_call_completes(
    env: Env, cache_redis: RedisProcess
) -> None:
    client = aioredis.from_url(cache_redis.url)
    try:
        await client.set(INDEX, "not an index")
        skipped = metrics.cache_stores.value(("orders.get", "unavailable"))
        for _ in range(2):
            result = await invoke(env, "orders.get", {"order_id": "o-1001"})
            assert output(result)["order_id"] == "o-1001"
        assert await env.upstream_calls(GET) == 2  # nothing was stored: no hit
        assert await entry_keys(client) == []  # and nothing outside the index
        assert metrics.cache_stores.value(("orders.get", "unavailable")) == skipped + 2
        assert await client.get(INDEX) == b"not an index"
    finally:
        await client.aclose()


async def test_a_lookup_redis_refuses_is_a_miss_and_the_call_completes(
    env: Env, cache_redis: RedisProcess
) -> None:
    client = aioredis.from_url(cache_redis.url)
    try:
        first = await invoke(env, "orders.get", {"order_id": "o-1001"})
        (entry,) = await entry_keys(client)
        await client.delete(entry)
        await client.hset(entry, "x", "1")  # the entry key now holds a hash: GET is WRONGTYPE
        unavailable = metrics.cache_lookups.value(("orders.get", "unavailable"))
        again = await invoke(env, "orders.get", {"order_id": "o-1001"})
        assert output(again) == output(first)
        assert await env.upstream_calls(GET) == 2
        assert metrics.cache_lookups.value(("orders.get", "unavailable")) == unavailable + 1
    finally:
        await client.aclose()
