"""The lean command path (gateway/state/lane.py, ADR 0042) against a real Redis: replies reach
the command that asked, whatever is cancelled, lost or flushed on the way; failures are
redis-py's exceptions within the bounds the redis-py path keeps."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import exceptions as rexc

from gateway.config.settings import RedisSettings
from gateway.state import lane as lane_module
from gateway.state.connections import (
    GatewayRedis,
    RedisUnavailable,
    connect,
    hot_get,
    hot_script,
    mapped_errors,
)
from gateway.state.embedded import RedisProcess, free_port, select, spawn
from gateway.state.lane import Lane, encode

ECHO = "return {KEYS[1], ARGV[1]}"


@pytest.fixture
async def client(redis_server: RedisProcess) -> AsyncIterator[GatewayRedis]:
    redis = connect(RedisSettings(url=redis_server.url))
    assert isinstance(redis, GatewayRedis)
    await redis.flushdb()
    yield redis
    await redis.aclose()


def lane_of(redis: GatewayRedis) -> Lane:
    assert redis.lane is not None
    return redis.lane


async def test_connect_gives_standalone_urls_a_lane_and_tls_none(
    redis_server: RedisProcess,
) -> None:
    plain = connect(RedisSettings(url=redis_server.url))
    tls = connect(RedisSettings(url="rediss://127.0.0.1:6390/0"))
    try:
        assert isinstance(plain, GatewayRedis) and plain.lane is not None
        assert isinstance(tls, GatewayRedis) and tls.lane is None
        # without a lane the hot path is redis-py's, and still answers
        await plain.set("k", b"v")
        assert await hot_get(plain)("k") == b"v"
    finally:
        await plain.aclose()
        await tls.aclose()


async def test_replies_reach_their_commands_under_random_cancellation(
    client: GatewayRedis,
) -> None:
    """500 scripts and GETs in flight on one pipelined connection, a third of the callers
    cancelled at random moments: every caller that waits gets its own reply."""
    script = hot_script(client, ECHO)
    get = hot_get(client)
    for n in range(50):
        await client.set(f"g{n}", f"value-{n}".encode())
    rng = random.Random(7)

    async def one(n: int) -> tuple[int, object]:
        if n % 2:
            return n, await script(keys=[f"k{n}"], args=[n])
        return n, await get(f"g{n % 50}")

    tasks = [asyncio.ensure_future(one(n)) for n in range(500)]
    victims = rng.sample(tasks, 170)
    for _ in range(5):
        await asyncio.sleep(0)
        for task in victims[:34]:
            task.cancel()
        victims = victims[34:]
    done = await asyncio.gather(*tasks, return_exceptions=True)
    answered = [d for d in done if not isinstance(d, BaseException)]
    assert len(answered) >= 330
    for n, reply in answered:
        if n % 2:
            assert reply == [f"k{n}".encode(), str(n).encode()]
        else:
            assert reply == f"value-{n % 50}".encode()
    # and the connection is still in step for the next caller
    assert await script(keys=["after"], args=["x"]) == [b"after", b"x"]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    values=st.lists(
        st.one_of(
            st.binary(max_size=64),
            st.text(max_size=32),
            st.integers(min_value=-(2**62), max_value=2**62),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_arguments_arrive_as_redis_py_sends_them(
    redis_server: RedisProcess, values: list[bytes | str | int | float]
) -> None:
    """Whatever a caller passes reaches Redis byte for byte as redis-py encodes it."""

    async def run() -> None:
        ours = connect(RedisSettings(url=redis_server.url))
        theirs = aioredis.Redis.from_url(redis_server.url)
        try:
            source = "return ARGV"
            assert isinstance(ours, GatewayRedis)
            mine = await hot_script(ours, source)(keys=[], args=values)
            reference = await theirs.register_script(source)(keys=[], args=values)
            assert mine == reference
        finally:
            await ours.aclose()
            await theirs.aclose()

    asyncio.run(run())


async def test_a_flushed_script_is_sent_again_as_eval(client: GatewayRedis) -> None:
    script = hot_script(client, "return 'flushed ' .. ARGV[1]")
    assert await script(keys=[], args=["once"]) == b"flushed once"
    await client.script_flush()
    assert await script(keys=[], args=["twice"]) == b"flushed twice"
    # concurrently, after another flush: each waits for its own EVAL
    await client.script_flush()
    replies = await asyncio.gather(*(script(keys=[], args=[n]) for n in range(20)))
    assert replies == [b"flushed %d" % n for n in range(20)]


async def test_error_replies_are_redis_py_exceptions(client: GatewayRedis) -> None:
    lane = lane_of(client)
    await client.rpush("a-list", b"x")
    with pytest.raises(rexc.ResponseError, match="WRONGTYPE"):
        await lane.execute("GET", "a-list")
    with pytest.raises(rexc.ResponseError):
        await hot_script(client, "return redis.call('NOPE')")(keys=[], args=[])
    # an error reply does not put the connection out of step
    assert await lane.execute("PING") == b"PONG"
    with pytest.raises(rexc.DataError):
        encode(("SET", "k", True))


async def test_a_killed_connection_fails_what_waits_and_the_next_command_reconnects(
    client: GatewayRedis, redis_server: RedisProcess
) -> None:
    lane = lane_of(client)
    # a command that waits in Redis (BLPOP on an empty list) and one behind it on the lane
    waiting = asyncio.ensure_future(lane.execute("BLPOP", "nothing-here", 5))
    behind = asyncio.ensure_future(lane.execute("PING"))
    await asyncio.sleep(0.1)
    killer = aioredis.Redis.from_url(redis_server.url)
    try:
        killed = await killer.client_kill_filter(_type="normal", skipme=True)
    finally:
        await killer.aclose()
    assert killed >= 1
    results = await asyncio.gather(waiting, behind, return_exceptions=True)
    assert all(isinstance(r, rexc.ConnectionError) for r in results), results
    with pytest.raises(RedisUnavailable), mapped_errors():
        raise results[0]
    # the next command opens a new connection
    assert await lane.execute("PING") == b"PONG"
    # and one killed while idle is noticed too
    killer = aioredis.Redis.from_url(redis_server.url)
    try:
        assert await killer.client_kill_filter(_type="normal", skipme=True) >= 1
    finally:
        await killer.aclose()
    await asyncio.sleep(0.05)
    assert await lane.execute("PING") == b"PONG"


async def test_a_redis_that_never_answers_times_out_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that accepts and never replies: the command fails with redis-py's
    TimeoutError after the operation timeout, and so does every command behind it."""
    monkeypatch.setattr(lane_module, "OPERATION_TIMEOUT_S", 0.5)
    accepted: list[socket.socket] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    loop = asyncio.get_running_loop()

    async def accept() -> None:
        conn, _ = await loop.sock_accept(server)
        accepted.append(conn)

    acceptor = asyncio.ensure_future(accept())
    lane = Lane(host="127.0.0.1", port=port)
    try:
        started = time.monotonic()
        first = asyncio.ensure_future(lane.execute("PING"))
        await asyncio.sleep(0.1)
        second = asyncio.ensure_future(lane.execute("PING"))
        results = await asyncio.gather(first, second, return_exceptions=True)
        elapsed = time.monotonic() - started
        assert all(isinstance(r, rexc.TimeoutError) for r in results), results
        assert 0.5 <= elapsed < 1.5
    finally:
        await lane.aclose()
        acceptor.cancel()
        for conn in accepted:
            conn.close()
        server.close()


async def test_nothing_listening_is_a_quick_connection_error() -> None:
    lane = Lane(host="127.0.0.1", port=free_port())
    started = time.monotonic()
    with pytest.raises(rexc.ConnectionError):
        await lane.execute("PING")
    assert time.monotonic() - started < 1.0
    with pytest.raises(RedisUnavailable), mapped_errors():
        await lane.execute("PING")


async def test_password_and_database_of_the_url(redis_server: RedisProcess) -> None:
    admin = aioredis.Redis.from_url(redis_server.url)
    await admin.acl_setuser(
        "lane-user", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"]
    )
    try:
        url = f"redis://lane-user:s3cret@127.0.0.1:{redis_server.port}/5"
        redis = connect(RedisSettings(url=url))
        assert isinstance(redis, GatewayRedis)
        try:
            assert await lane_of(redis).execute("SET", "in-db-5", b"yes") == b"OK"
            assert (
                await aioredis.Redis.from_url(f"redis://127.0.0.1:{redis_server.port}/5").get(
                    "in-db-5"
                )
                == b"yes"
            )
            assert await admin.get("in-db-5") is None  # database 0 does not have it
        finally:
            await redis.aclose()
        wrong = connect(RedisSettings(url=url.replace("s3cret", "wrong")))
        assert isinstance(wrong, GatewayRedis)
        try:
            with pytest.raises(rexc.AuthenticationError):
                await lane_of(wrong).execute("PING")
        finally:
            await wrong.aclose()
    finally:
        await admin.acl_deluser("lane-user")
        await admin.aclose()


@pytest.fixture
def unix_redis(tmp_path: Path) -> Iterator[Path]:
    home = Path("/tmp") / f"lane-{free_port()}"  # a socket path must stay short
    home.mkdir()
    sock = home / "r.sock"
    argv = ["--port", "0", "--unixsocket", str(sock), "--save", "", "--dir", str(tmp_path)]
    proc = spawn(select(), argv, tmp_path)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "redis-server did not open its socket"
            time.sleep(0.02)
        yield sock
    finally:
        proc.terminate()
        proc.wait(10)
        sock.unlink(missing_ok=True)
        home.rmdir()


async def test_a_unix_socket_url(unix_redis: Path) -> None:
    redis = connect(RedisSettings(url=f"unix://{unix_redis}?db=2"))
    assert isinstance(redis, GatewayRedis)
    try:
        assert await hot_script(redis, ECHO)(keys=["u"], args=["v"]) == [b"u", b"v"]
        assert await lane_of(redis).execute("CLIENT", "INFO") is not None
        await lane_of(redis).execute("SET", "k", b"2")
        assert await redis.get("k") == b"2"  # redis-py's path, same database
    finally:
        await redis.aclose()


def test_one_lane_serves_one_event_loop_after_another(redis_server: RedisProcess) -> None:
    redis = connect(RedisSettings(url=redis_server.url))
    assert isinstance(redis, GatewayRedis)
    script = hot_script(redis, ECHO)

    async def call(key: str) -> object:
        return await script(keys=[key], args=["1"])

    assert asyncio.run(call("a")) == [b"a", b"1"]
    assert asyncio.run(call("b")) == [b"b", b"1"]
    asyncio.run(redis.aclose())


async def _kill_normal_clients(url: str) -> None:
    killer = aioredis.Redis.from_url(url)
    try:
        assert await killer.client_kill_filter(_type="normal", skipme=True) >= 1
    finally:
        await killer.aclose()


async def test_a_connection_redis_closed_is_not_written_to(
    client: GatewayRedis, redis_server: RedisProcess
) -> None:
    """Redis closes an idle connection (a kill, its `timeout`, a restart): the next command goes
    on a new connection instead of failing on the closed one, every time."""
    lane = lane_of(client)
    for _ in range(5):
        assert await lane.execute("PING") == b"PONG"
        await _kill_normal_clients(redis_server.url)
        assert await lane.execute("PING") == b"PONG"


async def test_an_idle_connection_is_checked_before_a_command_goes_on_it(
    client: GatewayRedis, redis_server: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane = lane_of(client)
    assert await lane.execute("CLIENT", "SETNAME", "before-idle") == b"OK"
    monkeypatch.setattr(lane_module, "IDLE_CHECK_S", 0.0)  # every connection counts as idle
    assert await lane.execute("CLIENT", "GETNAME") == b"before-idle"  # checked, kept
    await _kill_normal_clients(redis_server.url)
    assert await lane.execute("CLIENT", "GETNAME") is None  # checked, found closed, replaced


async def test_a_lane_closed_while_connecting_keeps_no_connection(
    redis_server: RedisProcess,
) -> None:
    redis = connect(RedisSettings(url=redis_server.url))
    assert isinstance(redis, GatewayRedis)
    lane = lane_of(redis)
    first = asyncio.ensure_future(lane.execute("PING"))
    await asyncio.sleep(0)  # the connection is being opened
    await redis.aclose()
    await asyncio.gather(first, return_exceptions=True)
    assert lane._conn is None  # the connection that finished opening was closed, not kept


async def test_a_password_redis_does_not_expect_is_an_authentication_error(
    redis_server: RedisProcess,
) -> None:
    redis = connect(RedisSettings(url=f"redis://:not-set@127.0.0.1:{redis_server.port}/0"))
    assert isinstance(redis, GatewayRedis)
    try:
        with pytest.raises(rexc.AuthenticationError):
            await lane_of(redis).execute("PING")
        with pytest.raises(RedisUnavailable), mapped_errors():
            await lane_of(redis).execute("PING")
    finally:
        await redis.aclose()
