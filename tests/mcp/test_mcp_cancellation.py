"""Caller cancellation on the MCP surface (issue 25 item 5a, ADR 0039), through the real gateway,
a real Redis and the example upstream in this process (so the test can see the upstream call
begin and be cancelled): `notifications/cancelled` on a session, and a client that goes away,
each stop the upstream call, end the execution in exactly one `capability.cancelled` with its
truthful state, and leave the idempotency journal and the approval saying what the trail says."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest

from examples.orders.server import State
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import terminal_events
from tests.mcp.conftest import HERE
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, request, session_headers

pytestmark = pytest.mark.integration

REFUND = "/orders.v1.Orders/RefundOrder"
SLOW = "slow-20000"  # the upstream answers after 20 s: every test cancels long before
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
async def cancel_env(redis_server: RedisProcess) -> AsyncIterator[tuple[McpEnv, State]]:
    state = State()
    orders, port = await serve_orders("127.0.0.1:0", state=state)
    address = f"127.0.0.1:{port}"
    environ = gateway_environ(address, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = McpEnv(gw=gw, audit=memory, orders_address=address)
    yield env, state
    await env.close()
    await gw.stop(0.5)
    await orders.stop(0)


async def _until(state: State, condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        await state.recorder.wait_until(condition)


def _refund(rid: int, key: str = "", **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "orders_refund", "arguments": {"order_id": SLOW, "amount": 5}}
    if key:
        params["_meta"] = {"dev.capgate/idempotencyKey": key}
    params.update(extra)
    return request(rid, "tools/call", params)


def _modern(name: str, arguments: dict[str, Any], rid: int = 1) -> tuple[dict[str, Any], Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = request(rid, "tools/call", {"name": name, "arguments": arguments, "_meta": meta})
    headers = {
        "authorization": bearer("alice"),
        "accept": ACCEPT,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    return body, headers


def _only_execution(found: dict[str, list[dict[str, Any]]]) -> tuple[str, list[dict[str, Any]]]:
    assert len(found) == 1, found
    [(execution_id, events)] = found.items()
    return execution_id, events


def _ends_cancelled_once(events: list[dict[str, Any]], state: str) -> None:
    names = [e["event"] for e in events]
    assert names.count("capability.requested") == 1
    ends = terminal_events(events)
    assert [e["event"] for e in ends] == ["capability.cancelled"], names
    assert ends[0] is events[-1]
    assert ends[0]["code"] == "CANCELLED"
    assert ends[0]["execution_state"] == state


async def test_notifications_cancelled_stops_the_call_and_answers_what_the_trail_says(
    cancel_env: tuple[McpEnv, State],
) -> None:
    env, state = cancel_env
    state.reset()
    async with env.http() as http:
        session = await env.initialize(http)
        mark = await env.mark()
        call = asyncio.create_task(
            http.post("/mcp", json=_refund(7, key="k-cancel-1"), headers=session_headers(session))
        )
        await _until(state, lambda: state.recorder.calls[REFUND] == 1)
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        sent = await http.post("/mcp", json=notice, headers=session_headers(session))
        assert sent.status_code == 202
        answered = await call
        await _until(state, lambda: state.recorder.cancelled[REFUND] == 1)  # the upstream stopped
        assert answered.status_code == 200
        result = answered.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"] == {
            "code": "CANCELLED",
            "stage": "cancellation",
            "retryable": False,
            "execution_state": "UNKNOWN",  # the refund went out: its effect is unknown
        }
        execution_id, events = _only_execution(await env.executions_since(mark))
        assert result["_meta"]["dev.capgate/executionId"] == execution_id
        _ends_cancelled_once(events, "UNKNOWN")
        assert [e["event"] for e in events] == [
            "capability.requested",
            "capability.started",
            "capability.cancelled",
        ]
        # The journal holds what the trail says: the repeat replays this cancelled execution
        # and nothing runs again (the effect is unknown, so it is never re-run).
        repeat = await http.post(
            "/mcp", json=_refund(8, key="k-cancel-1"), headers=session_headers(session)
        )
    again = repeat.json()["result"]
    assert again["structuredContent"]["code"] == "CANCELLED"
    assert again["_meta"]["dev.capgate/executionId"] == execution_id
    assert state.recorder.calls[REFUND] == 1


async def test_a_notice_for_another_session_or_request_cancels_nothing(
    cancel_env: tuple[McpEnv, State],
) -> None:
    env, state = cancel_env
    state.reset()
    async with env.http() as http:
        mine, other = await env.initialize(http), await env.initialize(http)
        body = request(
            3, "tools/call", {"name": "orders_get", "arguments": {"order_id": "slow-300"}}
        )
        call = asyncio.create_task(http.post("/mcp", json=body, headers=session_headers(mine)))
        await _until(state, lambda: state.recorder.calls["/orders.v1.Orders/GetOrder"] == 1)
        for session, rid in ((other, 3), (mine, 4)):  # another session; another request id
            notice = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": rid},
            }
            sent = await http.post("/mcp", json=notice, headers=session_headers(session))
            assert sent.status_code == 202
        answered = await call
    assert answered.json()["result"]["isError"] is False
    assert state.recorder.cancelled["/orders.v1.Orders/GetOrder"] == 0


async def test_a_stateless_era_notice_changes_nothing(cancel_env: tuple[McpEnv, State]) -> None:
    """docs/mcp.md: in 2026-07-28 a disconnect is the signal; a notice is accepted, no more."""
    doc = " ".join((HERE.parents[1] / "docs" / "mcp.md").read_text().split())
    assert "there, `notifications/cancelled` is accepted (`202`) and changes nothing" in doc
    env, state = cancel_env
    state.reset()
    body, headers = _modern("orders_get", {"order_id": "slow-300"}, rid=5)
    async with env.http() as http:
        call = asyncio.create_task(http.post("/mcp", json=body, headers=headers))
        await _until(state, lambda: state.recorder.calls["/orders.v1.Orders/GetOrder"] == 1)
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 5, "_meta": body["params"]["_meta"]},
        }
        plain = {k: v for k, v in headers.items() if k not in ("mcp-method", "mcp-name")}
        sent = await http.post("/mcp", json=notice, headers=plain)
        answered = await call
    assert sent.status_code == 202, sent.text
    assert answered.json()["result"]["isError"] is False
    assert state.recorder.cancelled["/orders.v1.Orders/GetOrder"] == 0


async def test_a_client_that_goes_away_cancels_its_call(cancel_env: tuple[McpEnv, State]) -> None:
    """The 2026-07-28 revision's signal: closing the request's stream is its cancellation."""
    env, state = cancel_env
    state.reset()
    mark = await env.mark()
    body, headers = _modern("orders_refund", {"order_id": SLOW, "amount": 5})
    async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{env.port}", timeout=30) as http:
        call = asyncio.create_task(http.post("/mcp", json=body, headers=headers))
        await _until(state, lambda: state.recorder.calls[REFUND] == 1)
        call.cancel()  # the client closes the connection carrying the request
        with pytest.raises(asyncio.CancelledError):
            await call
    await _until(state, lambda: state.recorder.cancelled[REFUND] == 1)  # the upstream stopped
    _, events = _only_execution(await env.executions_since(mark))
    _ends_cancelled_once(events, "UNKNOWN")


async def test_a_resume_whose_client_goes_away_leaves_the_approval_as_the_trail_says(
    cancel_env: tuple[McpEnv, State],
) -> None:
    env, state = cancel_env
    state.reset()
    async with env.http() as http:
        session = await env.initialize(http)
        asked = await http.post(
            "/mcp",
            json=request(
                1,
                "tools/call",
                {"name": "orders_refund", "arguments": {"order_id": SLOW, "amount": 800}},
            ),
            headers=session_headers(session),
        )
        approval_id = asked.json()["result"]["structuredContent"]["approval_id"]
        await env.approve(approval_id)
        status = request(
            2,
            "tools/call",
            {"name": "capgate_approval_status", "arguments": {"approval_id": approval_id}},
        )
        mark = await env.mark()
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{env.port}", timeout=30) as own:
            call = asyncio.create_task(
                own.post("/mcp", json=status, headers=session_headers(session))
            )
            await _until(state, lambda: state.recorder.calls[REFUND] == 1)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        await _until(state, lambda: state.recorder.cancelled[REFUND] == 1)
        execution_id, events = _only_execution(await env.executions_since(mark))
        _ends_cancelled_once(events, "UNKNOWN")
        assert "capability.approval_consumed" in [e["event"] for e in events]
        # The approval was used by an attempt that went out: a repeat answers the stored
        # cancelled execution, and never runs the refund again.
        repeat = await http.post("/mcp", json=status, headers=session_headers(session))
    again = repeat.json()["result"]
    assert again["structuredContent"]["code"] == "CANCELLED"
    assert again["structuredContent"]["execution_state"] == "UNKNOWN"
    assert again["_meta"]["dev.capgate/executionId"] == execution_id
    assert state.recorder.calls[REFUND] == 1
