"""A failure after a cache hit tells the truth about that execution (docs/cache.md): it sent
nothing upstream, so `executed_before_failure` is false, in the envelope and in the audit event;
`execution_state` stays COMPLETED (the entry is the answer of an upstream call that completed,
for the execution that filled it) and `attempts` is 0. The same failure on a miss, where this
execution's request reached the upstream, says `executed_before_failure`.

Through the real gateway, real Redis, the real example upstream counting its calls, real CEL:
`orders.picky`'s `redact.output_expr` fails at stage 13 for anyone but a manager."""

from __future__ import annotations

from capgate.v1 import types_pb2
from tests.cache.test_cache_flow import GET, invoke, output
from tests.gateway.harness import Env

ORDER = {"order_id": "o-1001"}


async def _terminal(env: Env, execution_id: str) -> dict[str, object]:
    events = await env.events_for(execution_id)
    return events[-1]


async def test_a_redaction_failure_on_a_hit_was_not_executed_by_that_execution(env: Env) -> None:
    output(await invoke(env, "orders.picky", ORDER, "bob"))  # a manager fills the entry
    assert await env.upstream_calls(GET) == 1
    failed = await invoke(env, "orders.picky", ORDER, "alice")  # a hit; redaction fails
    assert await env.upstream_calls(GET) == 1  # served from the entry: nothing sent
    assert failed.WhichOneof("outcome") == "failed", failed
    assert failed.failed.code == types_pb2.ERROR_CODE_OUTPUT_INVALID
    assert failed.failed.executed_before_failure is False
    assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert failed.attempts == 0
    event = await _terminal(env, failed.execution_id)
    assert event["event"] == "capability.failed"
    assert "executed_before_failure" not in event
    assert event["attempt"] == 0
    assert event["cache"] == "hit"  # why nothing was executed: the entry answered


async def test_the_same_failure_on_a_miss_was_executed_before_failing(env: Env) -> None:
    failed = await invoke(env, "orders.picky", ORDER, "alice")  # a miss: the upstream answers
    assert await env.upstream_calls(GET) == 1
    assert failed.WhichOneof("outcome") == "failed", failed
    assert failed.failed.code == types_pb2.ERROR_CODE_OUTPUT_INVALID
    assert failed.failed.executed_before_failure is True
    assert failed.failed.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert failed.attempts == 1
    event = await _terminal(env, failed.execution_id)
    assert event["executed_before_failure"] is True
    assert "cache" not in event  # only a hit is named on a failure event
    # The entry was stored (stage 12 accepted the output): the next call is a hit.
    again = await invoke(env, "orders.picky", ORDER, "alice")
    assert await env.upstream_calls(GET) == 1
    assert again.failed.executed_before_failure is False
