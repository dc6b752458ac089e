"""The idempotency journal (§12): one claim per key, replays, conflicts, the release rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.config.settings import RedisSettings
from gateway.errors import CapabilityError, Code
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import IdempotencyScope, RedisIdempotencyStore

pytestmark = pytest.mark.integration

SCOPE = IdempotencyScope("https://idp.example", "alice", "agent", "orders.refund", "key-1")


@pytest.fixture
async def journal(
    redis_server: RedisProcess, redis_client: aioredis.Redis
) -> AsyncIterator[RedisIdempotencyStore]:
    client = connect(RedisSettings(url=redis_server.url))
    yield RedisIdempotencyStore(client, prefix="t", ttl_s=3600, clock=lambda: 1_700_000_000.0)
    await client.aclose()


async def _code(journal: RedisIdempotencyStore, h: str, execution_id: str) -> Code:
    with pytest.raises(CapabilityError) as err:
        await journal.claim(SCOPE, h, execution_id)
    return err.value.code


async def test_a_new_key_is_claimed_and_a_repeat_while_running_is_in_progress(
    journal: RedisIdempotencyStore,
) -> None:
    claim = await journal.claim(SCOPE, "h1", "e1")
    assert claim.claimed
    assert claim.execution_id == "e1"
    with pytest.raises(CapabilityError) as err:
        await journal.claim(SCOPE, "h1", "e2")
    assert err.value.code is Code.IDEMPOTENCY_IN_PROGRESS
    assert err.value.is_retryable


async def test_another_input_under_the_same_key_is_a_conflict(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    assert await _code(journal, "h2", "e2") is Code.IDEMPOTENCY_CONFLICT
    await journal.complete(SCOPE, b"envelope", execution_id="e1")
    assert await _code(journal, "h2", "e3") is Code.IDEMPOTENCY_CONFLICT


async def test_a_finished_call_is_replayed_not_executed_again(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    assert await journal.complete(SCOPE, b"\x0a\x02e1envelope", execution_id="e1")
    replay = await journal.claim(SCOPE, "h1", "e2")
    assert not replay.claimed
    assert (replay.replay, replay.execution_id) == (b"\x0a\x02e1envelope", "e1")
    # The first stored result stays: completing again stores nothing.
    assert not await journal.complete(SCOPE, b"other", execution_id="e1")
    assert (await journal.claim(SCOPE, "h1", "e3")).replay == b"\x0a\x02e1envelope"


async def test_the_claiming_execution_may_ask_again_after_a_lost_reply(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    assert (await journal.claim(SCOPE, "h1", "e1")).claimed


async def test_release_frees_a_not_started_call_for_a_retry_but_never_a_finished_one(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    assert not await journal.release(SCOPE, execution_id="e-other")  # not the holder
    assert await _code(journal, "h1", "e2") is Code.IDEMPOTENCY_IN_PROGRESS
    assert await journal.release(SCOPE, execution_id="e1")
    assert (await journal.claim(SCOPE, "h1", "e2")).claimed  # the retry runs
    await journal.complete(SCOPE, b"done", execution_id="e2")
    assert not await journal.release(SCOPE)
    assert (await journal.claim(SCOPE, "h1", "e3")).replay == b"done"


async def test_only_the_holder_completes_when_it_names_itself(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    assert not await journal.complete(SCOPE, b"intruder", execution_id="e2")
    assert await _code(journal, "h1", "e3") is Code.IDEMPOTENCY_IN_PROGRESS


async def test_the_scope_separates_actors_issuers_surfaces_and_capabilities(
    journal: RedisIdempotencyStore,
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    others = [
        IdempotencyScope("https://idp.example", "bob", "agent", "orders.refund", "key-1"),
        IdempotencyScope("https://other.example", "alice", "agent", "orders.refund", "key-1"),
        IdempotencyScope("https://idp.example", "alice", "mcp", "orders.refund", "key-1"),
        IdempotencyScope("https://idp.example", "alice", "agent", "orders.cancel", "key-1"),
        # A separator inside a field cannot make two scopes meet.
        IdempotencyScope("https://idp.example", "alice", "agent", "orders.refund\x00", "key-1"),
    ]
    for n, scope in enumerate(others):
        assert (await journal.claim(scope, "h2", f"x{n}")).claimed


async def test_a_plain_tuple_scope_is_the_same_key(journal: RedisIdempotencyStore) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    as_tuple = ("https://idp.example", "alice", "agent", "orders.refund", "key-1")
    assert journal.key(as_tuple) == journal.key(SCOPE)
    with pytest.raises(CapabilityError):
        await journal.claim(as_tuple, "h1", "e2")


async def test_concurrent_claims_of_one_key_let_exactly_one_run(
    journal: RedisIdempotencyStore,
) -> None:
    async def attempt(n: int) -> str:
        try:
            await journal.claim(SCOPE, "h1", f"e{n}")
        except CapabilityError as err:
            return err.code.value
        return "CLAIMED"

    outcomes = await asyncio.gather(*(attempt(n) for n in range(20)))
    assert outcomes.count("CLAIMED") == 1
    assert outcomes.count(Code.IDEMPOTENCY_IN_PROGRESS.value) == 19


async def test_entries_expire_after_the_ttl(
    journal: RedisIdempotencyStore, redis_client: aioredis.Redis
) -> None:
    await journal.claim(SCOPE, "h1", "e1")
    ttl_ms = await redis_client.pttl(journal.key(SCOPE))
    assert 3_590_000 < ttl_ms <= 3_600_000


async def test_with_redis_down_a_keyed_call_fails_retryably_and_is_never_claimed(
    tmp_path: Path,
) -> None:
    proc = RedisProcess(tmp_path / "redis").start()
    client = connect(RedisSettings(url=proc.url))
    journal = RedisIdempotencyStore(client, prefix="t", ttl_s=60, clock=lambda: 0.0)
    try:
        proc.kill()
        for call in (
            journal.claim(SCOPE, "h1", "e1"),
            journal.complete(SCOPE, b"x"),
            journal.release(SCOPE),
        ):
            with pytest.raises(CapabilityError) as err:
                await call
            assert err.value.code is Code.UPSTREAM_UNAVAILABLE
            assert err.value.is_retryable
    finally:
        await client.aclose()
        proc.stop()
