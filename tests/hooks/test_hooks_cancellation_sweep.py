"""The cancellation sweep (tests/cancelpoints.py) over calls with governance hooks: pre-hooks,
post-hooks and the observe-only PostFailure hooks are all awaits a caller's cancel may land on.
After each run: one terminal event, the envelope's truth about the upstream, the journal."""

from __future__ import annotations

import asyncio
import itertools

import orjson
import pytest

from capgate.v1 import types_pb2
from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from gateway.transport.mcp import execute
from tests.cancelpoints import REPEAT, answered, check_trail_and_journal, run_cancelled
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]

ALICE = Actor(id="alice", kind="user", issuer="test-idp", roles=("agent",))
_serial = itertools.count()

FLOWS = {
    # The scripted `guard` hook: pre-invoke, post-invoke (and post-failure when cancelled).
    "read-with-pre-and-post-hooks": ("orders.get", {"order_id": "o-1001"}),
    # The `standing` lookup and `guard` before a keyed write; the journal is checked too.
    "keyed-write-with-hooks": ("orders.refund", {"order_id": "o-1001", "amount": 5}),
}


def _call(env: Env, capability: str, value: object) -> Call:
    return Call(
        snapshot=env.gw.holder.current,
        surface="agent",
        actor=ALICE,
        capability_id=capability,
        raw_input=orjson.dumps(value),
        idempotency_key=f"hook-sweep-{next(_serial)}",
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("flow", list(FLOWS))
async def test_a_cancel_at_every_await_point_of_a_hooked_call(hooked: Env, flow: str) -> None:
    capability, value = FLOWS[flow]
    call = _call(hooked, capability, value)
    points = await run_cancelled(call, hooked, pipeline.INVOKE, cancel_at=None)
    end = await check_trail_and_journal(hooked, call, f"{flow} uncancelled")
    assert end["event"] == "capability.completed", end
    assert points >= 4, points  # the hooks' calls are among them
    for k in [k for _ in range(REPEAT) for k in range(1, points + 1)]:
        call = _call(hooked, capability, value)
        await run_cancelled(call, hooked, pipeline.INVOKE, cancel_at=k)
        await check_trail_and_journal(hooked, call, f"{flow} cancelled at suspension {k}")
    print(f"{flow}: {points} await points swept")


_KINDS = {
    "capability.completed": "completed",
    "capability.approval_requested": "approval_required",
    "capability.failed": "failed",
    "capability.denied": "failed",
    "capability.cancelled": "cancelled",
}


@pytest.mark.timeout(300)
async def test_an_mcp_call_cancelled_at_every_point_answers_what_the_trail_says(
    hooked: Env,
) -> None:
    """The MCP listener answers a cancelled call (a client still listening after
    `notifications/cancelled`) instead of raising: the answer is the outcome the trail
    records, never CANCELLED for a call that completed (ADR 0039)."""
    capability, value = FLOWS["read-with-pre-and-post-hooks"]
    call = _call(hooked, capability, value)
    points = await run_cancelled(call, hooked, pipeline.INVOKE, None, runner=execute.run)
    for k in [k for _ in range(REPEAT) for k in range(1, points + 1)]:
        call = _call(hooked, capability, value)
        await run_cancelled(call, hooked, pipeline.INVOKE, k, runner=execute.run)
        end = await check_trail_and_journal(hooked, call, f"mcp cancelled at suspension {k}")
        answer = answered.pop(id(call))
        assert answer.WhichOneof("outcome") == _KINDS[end["event"]], (k, answer, end["event"])


async def test_a_shutdown_while_the_call_finishes_answers_the_caller(
    hooked: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain cancels a call whose upstream answered while its post-hooks still run: the
    caller gets an envelope that says the effect happened (never the UNAVAILABLE of an
    aborted RPC, which reads as safe to send again), and the trail records the real outcome.
    The wait for the outcome is made zero so the state's answer is the one given."""
    monkeypatch.setattr(pipeline, "SHUTDOWN_HOOKS_S", 0.0)
    capability, value = FLOWS["read-with-pre-and-post-hooks"]
    call = _call(hooked, capability, value)
    rt = hooked.gw.runtime
    task = asyncio.ensure_future(pipeline.run(call, rt, pipeline.INVOKE))
    while call.finishing is None and not task.done():  # noqa: ASYNC110 - the step it reaches
        await asyncio.sleep(0)
    assert call.finishing is not None, "the call never reached its finishing task"
    assert rt.drain.cancel_running() == [task]
    answer = await task  # answered, not raised
    assert answer.WhichOneof("outcome") in {"completed", "cancelled"}, answer
    if answer.WhichOneof("outcome") == "cancelled":
        assert answer.cancelled.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
        assert not answer.cancelled.retryable
    await call.finishing
    await rt.audit.flush()  # type: ignore[attr-defined]
    end = await check_trail_and_journal(hooked, call, "shutdown while finishing")
    assert end["event"] == "capability.completed"
