"""Issue 25 item 4, the same class at the inline approver: grpc.aio hands back None for an
answer its deserializer cannot parse, so an Approver upstream that answers bytes that are not
an ApproverDecideResponse rejects the call (stage 8 inline fails closed: APPROVAL_REJECTED,
nothing ran), never EXECUTION_FAILED. The real gateway, real Redis, the example upstream and a
loopback Approver server answering raw bytes (no serializer: they go out as they are)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env, terminal_events
from tests.gateway.test_inline_approval_and_output_expr import _config, code

pytestmark = pytest.mark.integration

GARBAGE = b"\xff\xff\xff\xff"  # a varint tag that never ends: no message parses from it


async def _decide(_request: bytes, _context: Any) -> bytes:
    return GARBAGE


@pytest.fixture
async def garbled_env(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[Env]:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "capgate.v1.Approver", {"Decide": grpc.unary_unary_rpc_method_handler(_decide)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        _config(tmp_path, f"127.0.0.1:{port}"),
        environ=gateway_environ(orders_upstream, redis_server.url, run_dir),
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(
        gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/capgate.sock"
    )
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
    await server.stop(0)


async def test_an_undecodable_inline_approver_answer_rejects_the_call(garbled_env: Env) -> None:
    await garbled_env.reset_upstream()
    result = await garbled_env.invoke("payments.refund", {"order_id": "o-1003", "amount": 10})
    assert code(result) == "APPROVAL_REJECTED", result
    assert await garbled_env.upstream_calls() == 0
    events = await garbled_env.events_for(result.execution_id)
    rejected = [e for e in events if e["event"] == "capability.rejected"]
    assert [e["reason"] for e in rejected] == ["approver answer is not an ApproverDecideResponse"]
    assert len(terminal_events(events)) == 1
