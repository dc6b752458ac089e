"""A hook stub that fails with something other than a gRPC status (a channel closed by a
reload, a usage error) is a hook fault under the hook's failure mode, never an
EXECUTION_FAILED (review 2, item 5). The real gateway and the tests' real hook server; the
hook's stub is swapped for one on a closed channel to the same server."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import grpc
import orjson
import pytest
from capgate_client.hook import PreInvokeResult

from capgate.v1 import hook_pb2_grpc
from tests.gateway.harness import Env
from tests.hooks.script import Script
from tests.hooks.test_hooks_pipeline import FAILED, cid, code_of, terminal

pytestmark = [pytest.mark.integration]


@asynccontextmanager
async def closed_stub(env: Env, capability: str, hook: str, address: str) -> Any:
    prepared = env.gw.holder.current.capabilities[capability]
    (bound,) = [h for h in prepared.hooks.pre if h.spec.name == hook]
    channel = grpc.aio.insecure_channel(address)
    await channel.close()  # every call on it raises UsageError, not an AioRpcError
    saved = bound.stub
    object.__setattr__(bound, "stub", hook_pb2_grpc.HookStub(channel))
    try:
        yield
    finally:
        object.__setattr__(bound, "stub", saved)


async def test_a_fail_open_hook_on_a_closed_channel_is_recorded_and_ignored(
    hooked: Env, hook_server: str
) -> None:
    async with closed_stub(hooked, "orders.optional", "optional", hook_server):
        result = await hooked.invoke("orders.optional", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed", result
    event = await terminal(hooked, result.execution_id)
    optional = next(h for h in event["hooks"] if h["hook"] == "optional")
    assert optional["error"] == "call failed (UsageError)"


async def test_a_fail_closed_hook_on_a_closed_channel_is_hook_failed(
    hooked: Env, crasher: str
) -> None:
    before = await hooked.upstream_calls("GetOrder")
    async with closed_stub(hooked, "orders.crashy", "crasher", crasher):
        result = await hooked.invoke("orders.crashy", {"order_id": "o-1001"})
    assert code_of(result) == "HOOK_FAILED", result
    assert result.execution_state == FAILED and result.failed.retryable
    assert await hooked.upstream_calls("GetOrder") == before


async def test_an_undeclared_context_attribute_name_never_reaches_the_trail(
    hooked: Env, script: Script
) -> None:
    key = cid()
    script.pre[key] = PreInvokeResult(context={"card-4111111111111111": True})
    result = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 2}, correlation_id=key
    )
    assert code_of(result) == "HOOK_FAILED", result
    event = await terminal(hooked, result.execution_id)
    guard = next(h for h in event["hooks"] if h["hook"] == "guard")
    assert guard["error"] == "context_json has an undeclared attribute"
    events = await hooked.events_for(result.execution_id)
    assert "4111111111111111" not in orjson.dumps(events).decode()
