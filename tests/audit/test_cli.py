"""`capgate audit query|tail|hmac` over the real Redis stream written by a running gateway."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import orjson
import pytest

from gateway.cli import audit as cli
from gateway.state.embedded import RedisProcess
from tests.audit.kit import STREAM, Stack
from tests.gateway.conftest import gateway_environ

pytestmark = pytest.mark.integration


async def run(*argv: str) -> tuple[int, list[dict[str, Any]]]:
    out = io.StringIO()
    code = await asyncio.to_thread(cli.run, list(argv), out)
    return code, [orjson.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
async def trail(audited: Stack, redis_server: RedisProcess) -> dict[str, str]:
    """Three executions in the stream: alice's read, alice's denied refund, bot's read."""
    env = audited.env
    ids = {
        "read": (await env.invoke("orders.get", {"order_id": "o-1001"})).execution_id,
        "denied": (
            await env.invoke("orders.refund", {"order_id": "o-1", "amount": 20000})
        ).execution_id,
        "bot": (await env.invoke("orders.list", {"customer_id": "c-1"}, actor="bot")).execution_id,
    }
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return {**ids, "url": redis_server.url}


async def test_query_by_execution_id_returns_its_events_in_order(trail: dict[str, str]) -> None:
    code, events = await run(
        "query", "--redis-url", trail["url"], "--stream", STREAM, "--execution-id", trail["read"]
    )
    assert code == 0
    assert [e["event"] for e in events] == [
        "capability.requested",
        "capability.started",
        "capability.completed",
    ]


async def test_query_filters_by_capability_actor_event_and_time(trail: dict[str, str]) -> None:
    base = ("query", "--redis-url", trail["url"], "--stream", STREAM)
    _, denied = await run(
        *base, "--capability", "orders.refund", "--event", "capability.denied", "--since", "10m"
    )
    assert trail["denied"] in {e["execution_id"] for e in denied}
    assert all(e["capability_id"] == "orders.refund" for e in denied)
    _, bots = await run(*base, "--actor", "bot-7")
    assert trail["bot"] in {e["execution_id"] for e in bots}
    assert {e["actor_id"] for e in bots} == {"bot-7"}
    _, none = await run(*base, "--until", "2000-01-01T00:00:00Z")
    assert none == []
    _, limited = await run(*base, "--limit", "2")
    assert len(limited) == 2


async def test_a_consumer_group_gets_each_entry_once_and_unacked_ones_again(
    trail: dict[str, str],
) -> None:
    group = (
        "tail",
        "--redis-url",
        trail["url"],
        "--stream",
        STREAM,
        "--group",
        "siem",
        "--since",
        "10m",
        "--execution-id",
        trail["read"],
        "--idle-timeout",
        "0.5",
    )
    _, first = await run(*group, "--consumer", "c1", "--limit", "1")
    assert [e["event"] for e in first] == ["capability.requested"]
    # c1 stopped after one event: the rest of what it read is still pending for c1 ...
    _, other = await run(*group, "--consumer", "c2")
    assert other == []  # ... so another consumer of the group does not get it
    _, again = await run(*group, "--consumer", "c1")
    assert [e["event"] for e in again] == ["capability.started", "capability.completed"]
    _, done = await run(*group, "--consumer", "c1")
    assert done == []  # acknowledged


async def test_tail_prints_new_events_as_they_are_written(
    audited: Stack, trail: dict[str, str]
) -> None:
    tail = asyncio.create_task(
        run(
            "tail",
            "--redis-url",
            trail["url"],
            "--stream",
            STREAM,
            "--capability",
            "orders.get",
            "--limit",
            "3",
            "--idle-timeout",
            "10",
        )
    )
    await asyncio.sleep(0.3)  # the tail starts at the end of the stream
    result = await audited.env.invoke("orders.get", {"order_id": "o-1002"})
    await audited.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    code, events = await asyncio.wait_for(tail, 15)
    assert code == 0
    assert {e["execution_id"] for e in events} == {result.execution_id}


async def test_hmac_recomputes_the_digest_an_event_carries(
    audited: Stack, trail: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, events = await run(
        "query",
        "--redis-url",
        trail["url"],
        "--stream",
        STREAM,
        "--execution-id",
        trail["read"],
        "--event",
        "capability.completed",
    )
    value = tmp_path / "input.json"
    value.write_text('{"order_id": "o-1001"}')
    for name, val in gateway_environ("127.0.0.1:1", trail["url"], str(tmp_path)).items():
        monkeypatch.setenv(name, val)
    code, (digest,) = await run("hmac", "--config", str(audited.settings.source), str(value))
    assert code == 0
    assert digest == {"input_hmac": events[0]["input_hmac"], "input_hmac_key_id": "test-k1"}


async def test_without_a_redis_url_the_cli_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, events = await run("query")
    assert code == 2
    assert events == []
    assert "no Redis URL" in capsys.readouterr().err
