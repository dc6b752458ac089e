"""The inbox's server-side sessions on a real Redis, with an injected clock: idle and absolute
expiry, the credential's own expiry, sign-out, the per-human bound, roles from the newest
sign-in, CSRF tokens per session, and every key bounded in time."""

from __future__ import annotations

import hashlib

import pytest
import redis.asyncio as aioredis

from gateway.inbox.sessions import SessionStore, csrf_matches
from gateway.model import Actor

pytestmark = pytest.mark.integration
BOB = Actor(id="bob", kind="user", issuer="idp", roles=("manager",))
CAROL = Actor(id="carol", kind="user", issuer="idp", roles=("manager",))


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def store(redis: aioredis.Redis, clock: Clock, **overrides: float) -> SessionStore:
    values = {"idle_s": 600.0, "lifetime_s": 3600.0, "max_per_actor": 3} | overrides
    return SessionStore(
        redis,
        prefix="t",
        idle_s=values["idle_s"],
        lifetime_s=values["lifetime_s"],
        max_per_actor=int(values["max_per_actor"]),
        clock=clock,
    )


async def test_a_session_ends_after_idling_and_activity_keeps_it_open(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    s = await sessions.create(BOB, not_after=9e9)
    for _ in range(5):  # a request every 9 minutes: never idle for 10
        clock.now += 540
        assert await sessions.read(s.sid) is not None
    clock.now += 600
    assert await sessions.read(s.sid) is None
    assert await redis_client.keys("t:inbox:session:*") == []  # dropped, not just refused


async def test_a_session_ends_at_its_absolute_lifetime_or_its_token_expiry(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    long = await sessions.create(BOB, not_after=9e9)
    short = await sessions.create(CAROL, not_after=1000.0 + 900)  # the token expires first
    assert (long.expires_at, short.expires_at) == (4600.0, 1900.0)
    for now in (1500.0, 1899.0):
        clock.now = now
        assert await sessions.read(short.sid) is not None
    clock.now = 1900.0
    assert await sessions.read(short.sid) is None
    clock.now = 1000.0
    while clock.now + 300 < 4600:  # active all along
        clock.now += 300
        assert await sessions.read(long.sid) is not None
    clock.now = 4600.0
    assert await sessions.read(long.sid) is None


async def test_sign_out_ends_the_session_and_unknown_ids_are_nothing(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    s = await sessions.create(BOB, not_after=9e9)
    other = await sessions.create(BOB, not_after=9e9)
    await sessions.delete(s.sid)
    assert await sessions.read(s.sid) is None
    assert await sessions.read(other.sid) is not None  # only that one
    for bogus in ("", "x", s.sid + "x", "a" * 5000):
        assert await sessions.read(bogus) is None
        await sessions.delete(bogus)


async def test_a_human_holds_at_most_max_per_actor_sessions(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    opened = []
    for _ in range(5):
        clock.now += 1
        opened.append(await sessions.create(BOB, not_after=9e9))
    carol = await sessions.create(CAROL, not_after=9e9)
    alive = [await sessions.read(s.sid) is not None for s in opened]
    assert alive == [False, False, True, True, True]  # the oldest two were pushed out
    assert await sessions.read(carol.sid) is not None  # per human, not global
    index = list(await redis_client.keys("t:inbox:actor-sessions:*"))
    assert sorted([await redis_client.zcard(k) for k in index]) == [1, 3]


async def test_roles_come_from_the_newest_sign_in_not_the_session(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    first = await sessions.create(BOB, not_after=9e9)
    read = await sessions.read(first.sid)
    assert read is not None
    assert read.actor.roles == ("manager",)
    await sessions.create(Actor(id="bob", kind="user", issuer="idp", roles=()), not_after=9e9)
    read = await sessions.read(first.sid)
    assert read is not None
    assert read.actor.roles == ()  # removed from the older session on its next request
    assert read.actor.identity == ("idp", "bob")


async def test_csrf_tokens_are_per_session_and_the_cookie_is_not_a_key(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock)
    a = await sessions.create(BOB, not_after=9e9)
    b = await sessions.create(BOB, not_after=9e9)
    assert a.csrf != b.csrf
    assert len(a.sid) >= 43  # 256 random bits
    read = await sessions.read(a.sid)
    assert read is not None
    assert csrf_matches(read, a.csrf)
    assert not csrf_matches(read, b.csrf)
    assert not csrf_matches(read, "")
    keys = [k.decode() for k in await redis_client.keys("t:inbox:*")]
    assert all(a.sid not in k and b.sid not in k for k in keys)
    assert f"t:inbox:session:{hashlib.sha256(a.sid.encode()).hexdigest()}" in keys
    for raw in [await redis_client.get(k) for k in keys if ":session:" in k]:
        assert a.sid.encode() not in raw


async def test_every_session_key_expires_no_later_than_what_it_serves(
    redis_client: aioredis.Redis,
) -> None:
    clock = Clock(1000.0)
    sessions = store(redis_client, clock, idle_s=600, lifetime_s=3600)
    await sessions.create(BOB, not_after=1000.0 + 300)  # the token ends before the idle limit
    await sessions.create(CAROL, not_after=9e9)
    for key in await redis_client.keys("t:inbox:*"):
        ttl = await redis_client.ttl(key)
        assert 0 < ttl <= 3600, key
        if b":session:" in key:
            assert ttl <= 600
    ttls = sorted([await redis_client.ttl(k) for k in await redis_client.keys("t:inbox:session:*")])
    assert ttls[0] <= 300
