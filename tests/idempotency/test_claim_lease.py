"""The claim's lease (issue 14, item 8; ADR 0014) on real Redis with an injected clock: a running
claim answers IN_PROGRESS until its lease ends, then "outcome unknown" — never a new claim."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.config.settings import RedisSettings
from gateway.errors import CapabilityError, Code
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import IdempotencyScope, RedisIdempotencyStore, outcome_unknown_error

pytestmark = pytest.mark.integration

SCOPE = IdempotencyScope("https://idp.example", "alice", "agent", "orders.refund", "lease-1")
T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def journal(redis_server: RedisProcess) -> AsyncIterator[tuple[RedisIdempotencyStore, Clock]]:
    client = connect(RedisSettings(url=redis_server.url))
    clock = Clock()
    store = RedisIdempotencyStore(client, prefix="lease", ttl_s=3600, clock=clock)
    await client.delete(store.key(SCOPE))
    yield store, clock
    await client.delete(store.key(SCOPE))
    await client.aclose()


async def test_in_progress_until_the_lease_ends_then_outcome_unknown(
    journal: tuple[RedisIdempotencyStore, Clock],
) -> None:
    store, clock = journal
    assert (await store.claim(SCOPE, "h", "e1", lease_s=40)).claimed
    clock.now = T0 + 40  # the lease's last instant
    with pytest.raises(CapabilityError) as err:
        await store.claim(SCOPE, "h", "e2", lease_s=40)
    assert err.value.code is Code.IDEMPOTENCY_IN_PROGRESS
    clock.now = T0 + 40.001
    for later in ("e3", "e4"):
        claim = await store.claim(SCOPE, "h", later, lease_s=40)
        assert claim.outcome_unknown and not claim.claimed and claim.replay is None
        assert claim.execution_id == "e1"  # still the crashed holder's key
    # Another input is a conflict whatever the lease says.
    with pytest.raises(CapabilityError) as err:
        await store.claim(SCOPE, "other", "e5", lease_s=40)
    assert err.value.code is Code.IDEMPOTENCY_CONFLICT


async def test_the_holder_past_its_lease_still_records_and_repeats_replay(
    journal: tuple[RedisIdempotencyStore, Clock],
) -> None:
    store, clock = journal
    await store.claim(SCOPE, "h", "e1", lease_s=5)
    clock.now = T0 + 60
    assert (await store.claim(SCOPE, "h", "e1", lease_s=5)).claimed  # its own lost reply
    assert (await store.claim(SCOPE, "h", "e2", lease_s=5)).outcome_unknown
    assert await store.complete(SCOPE, b"envelope", execution_id="e1")
    assert (await store.claim(SCOPE, "h", "e3", lease_s=5)).replay == b"envelope"


async def test_a_not_started_holder_past_its_lease_gives_the_key_back(
    journal: tuple[RedisIdempotencyStore, Clock],
) -> None:
    store, clock = journal
    await store.claim(SCOPE, "h", "e1", lease_s=5)
    clock.now = T0 + 60
    assert await store.release(SCOPE, execution_id="e1")
    assert (await store.claim(SCOPE, "h", "e2", lease_s=5)).claimed


async def test_a_claim_without_a_lease_is_held_until_its_ttl(
    journal: tuple[RedisIdempotencyStore, Clock],
) -> None:
    store, clock = journal
    await store.claim(SCOPE, "h", "e1")
    clock.now = T0 + 3000
    with pytest.raises(CapabilityError) as err:
        await store.claim(SCOPE, "h", "e2", lease_s=5)
    assert err.value.code is Code.IDEMPOTENCY_IN_PROGRESS


def test_the_outcome_unknown_answer_is_final_and_says_so() -> None:
    err = outcome_unknown_error()
    assert err.code is Code.EXECUTION_FAILED
    assert not err.is_retryable and err.exposed
    assert "unknown" in err.public_message and "not run again" in err.public_message
