"""Gateways sealing under different cache keys on one real Redis (docs/cache.md): each entry's
Redis key names its sealing key, so neither overwrites the other's entries, and an entry that
does not open is a quiet miss (debug log, `unopened` lookup), never a warning per lookup."""

from __future__ import annotations

import logging

import pytest
import redis.asyncio as aioredis

from gateway.state.cache import ResultCache, cache_key

PARTS = ("orders.get", "digest", "rev-1", "agent", "shared", "", "input-hash")


def _cache(redis: aioredis.Redis, secret: str) -> ResultCache:
    return ResultCache(
        redis,
        prefix="capgate-keys-test",
        key=cache_key(secret),
        timeout_s=2.0,
        max_entries=50,
        clock=lambda: 1000.0,
    )


async def test_two_keys_on_one_redis_keep_their_own_entries(
    redis_client: aioredis.Redis,
) -> None:
    one, two = _cache(redis_client, "secret-one"), _cache(redis_client, "secret-two")
    key_one = one.entry_key("orders.get", PARTS)
    key_two = two.entry_key("orders.get", PARTS)
    assert key_one != key_two  # the same parts under another key: another Redis key
    assert await one.put("orders.get", key_one, b'{"by": "one"}', 60)
    assert await two.put("orders.get", key_two, b'{"by": "two"}', 60)
    assert (await one.get("orders.get", key_one)).value == b'{"by": "one"}'
    assert (await two.get("orders.get", key_two)).value == b'{"by": "two"}'
    # Same secret, another process: the same Redis key, and the entry opens.
    again = _cache(redis_client, "secret-one")
    assert again.entry_key("orders.get", PARTS) == key_one
    assert (await again.get("orders.get", key_one)).value == b'{"by": "one"}'


async def test_an_entry_that_does_not_open_is_a_quiet_counted_miss(
    redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = _cache(redis_client, "secret-one"), _cache(redis_client, "secret-two")
    key_one = one.entry_key("orders.get", PARTS)
    assert await one.put("orders.get", key_one, b'{"by": "one"}', 60)
    with caplog.at_level(logging.INFO, logger="capgate"):
        found = await two.get("orders.get", key_one)  # someone copied it where two looks
    assert (found.result, found.value) == ("unopened", None)
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]
