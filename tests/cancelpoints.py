"""Cancellation is an input (STYLE; issue 25): run the pipeline as the servicer does and cancel
it exactly at its k-th suspension, found by walking the task's await chain. An injected
cancellation point, never a sleep: every await where the task really suspends is a point, in
order, whatever the timing of the Redis or upstream replies it waits for.

The sweeps (tests/limits, tests/hooks, tests/cache) run a flow once to count its points, then
once per point (`SWEEP_REPEAT` times), and check their invariants after each run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from capgate.v1 import gateway_pb2, types_pb2
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from tests.gateway.harness import Env, terminal_events

# `make sweep` runs every point this many times (each run lands the cancel at the same await;
# what the awaited reply is doing meanwhile varies).
REPEAT = int(os.environ.get("SWEEP_REPEAT", "1"))
answered: dict[int, Any] = {}  # id(call) -> what the runner answered, when it answered


def suspension(task: asyncio.Task[Any]) -> tuple[tuple[str, int], ...]:
    """Where the task is suspended: (file, line) of every frame of its await chain."""
    out = []
    node: Any = task.get_coro()
    while node is not None:
        frame = getattr(node, "cr_frame", None) or getattr(node, "gi_frame", None)
        if frame is None:
            break
        out.append((frame.f_code.co_filename, frame.f_lineno))
        node = getattr(node, "cr_await", None) or getattr(node, "gi_yieldfrom", None)
    return tuple(out)


def _ours(task: asyncio.Task[Any]) -> bool:
    """A task the gateway's own code started (the settlement, a shielded Redis request), not
    grpcio's long-lived channel tasks (Cython coroutines)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and "/gateway/" in code.co_filename


async def run_cancelled(
    call: Call,
    env: Env,
    stages: tuple[pipeline.Stage, ...],
    cancel_at: int | None,
    runner: Callable[..., Awaitable[Any]] = pipeline.run,
) -> int:
    """Runs the pipeline as the servicer would (or `runner`, e.g. the MCP listener's, which
    answers instead of raising) and cancels it at its `cancel_at`-th suspension; returns how
    many suspensions it saw. Waits until everything the run started (the settlement, shielded
    recordings) ended. What a runner answered is in `answered[id(call)]`."""
    before = asyncio.all_tasks()
    task = asyncio.ensure_future(runner(call, env.gw.runtime, stages))
    seen, last = 0, None
    while not task.done():
        await asyncio.sleep(0)
        if task.done():
            break
        where = suspension(task)
        if where != last:
            seen, last = seen + 1, where
            if seen == cancel_at:
                task.cancel()
                break
    try:
        answered[id(call)] = await task
    except asyncio.CancelledError:
        assert cancel_at is not None
    started = [t for t in asyncio.all_tasks() - before if _ours(t)]
    if started:
        _, left = await asyncio.wait(started, timeout=10)
        assert not left, ("the settlement did not end", left)
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return seen


async def reached(env: Env, execution_id: str) -> int:
    """How many requests of this execution the example upstream received."""
    stats = await env.stats()
    return sum(1 for r in stats.log if r.execution_id == execution_id)


async def check_trail_and_journal(env: Env, call: Call, where: str) -> dict[str, Any]:
    """The invariants every flow shares: one terminal event per `capability.requested`; the
    envelope's truth about the upstream (NOT_STARTED: nothing received; completed: received
    once, unless replayed or answered by the cache); the journal of a keyed call holds what
    the upstream did (never left running, free only when nothing was sent, a completion
    recorded as completed). Returns the terminal event."""
    eid = call.execution_id
    assert eid, where
    events = [e for e in env.audit.events if e.get("execution_id") == eid]
    requested = [e for e in events if e["event"] == "capability.requested"]
    ends = terminal_events(events)
    assert len(requested) == 1, (where, [e["event"] for e in events])
    assert len(ends) == 1, (where, [e["event"] for e in events])
    end = ends[0]
    count = await reached(env, eid)
    ran = call.state != types_pb2.EXECUTION_STATE_NOT_STARTED
    assert count <= 1, where
    assert ran or count == 0, (where, "NOT_STARTED but the upstream counted it")
    if end["event"] == "capability.completed" and not end.get("replayed") and call.cache != "hit":
        assert count == 1, where
    if call.state == types_pb2.EXECUTION_STATE_COMPLETED:
        # The upstream answered (or the cache did): a cancel from then on changes nothing, the
        # call completes and its output is recorded (the sweeps' flows have valid outputs).
        assert end["event"] == "capability.completed", (where, end["event"])
    if call.idempotency_key:
        assert call.actor is not None and call.prepared is not None
        actor = call.actor
        scope = (actor.issuer, actor.id, call.surface, call.capability_id, call.idempotency_key)
        client = aioredis.from_url(env.gw.settings.redis.url)
        try:
            journal = await client.hgetall(env.gw.runtime.idempotency.key(scope))
        finally:
            await client.aclose()
        state = journal.get(b"state")
        assert state != b"running", (where, "a key left running")
        if state is None:
            assert not ran, (where, "the key is free although the call was sent")
        else:
            stored = gateway_pb2.ExecutionResult.FromString(journal[b"envelope"])
            assert stored.execution_id == eid, where
            if end["event"] == "capability.completed":
                assert stored.WhichOneof("outcome") == "completed", (where, stored)
            if not ran:  # nothing was sent: no completion of this execution is recorded
                assert end.get("replayed") or stored.WhichOneof("outcome") != "completed", where
    return end
