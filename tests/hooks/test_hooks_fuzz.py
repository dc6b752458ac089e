"""The family of a hook's broken answers, fuzzed through the real server (seeded, bounded in
count): whatever a pre-hook returns, the call either runs with a schema-valid input or fails
closed as HOOK_FAILED with nothing sent upstream, and the gateway keeps serving."""

from __future__ import annotations

import random
import uuid
from typing import Any

import orjson
import pytest
from capgate_client.hook import UNCHANGED, PreInvokeResult

from capgate.v1 import types_pb2
from tests.gateway.harness import Env
from tests.hooks.script import Script

pytestmark = pytest.mark.integration

SEED = 18_002
CASES = 40
KNOWN = ("o-1001", "o-1002")


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 2**63, 1.5, float("1e300")])
    if kind == 2:
        return rng.choice(["", "o-1001", "x" * rng.choice([1, 70, 5000]), "\u202e", "\x00"])
    if kind == 3:
        return rng.choice(KNOWN)
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if kind == 5:
        return {rng.choice(["order_id", "extra", "a"]): _value(rng, depth + 1)}
    return {"order_id": _value(rng, depth + 1)}


def _answer(rng: random.Random) -> PreInvokeResult:
    updated: Any = UNCHANGED
    if rng.random() < 0.8:
        updated = {"order_id": rng.choice(KNOWN)} if rng.random() < 0.3 else _value(rng)
    context = {} if rng.random() < 0.7 else {rng.choice(["x", "in_arrears"]): _value(rng)}
    decision = rng.choice([None, None, "allow"])
    return PreInvokeResult(decision=decision, context=context, updated_input=updated)


async def test_any_pre_hook_answer_runs_valid_input_or_fails_closed(
    hooked: Env, script: Script
) -> None:
    rng = random.Random(SEED)  # injected randomness: the same cases every run
    outcomes: set[str] = set()
    for _ in range(CASES):
        key = f"f-{uuid.uuid4().hex[:10]}"
        answer = _answer(rng)
        script.pre[key] = answer
        before = await hooked.upstream_calls("GetOrder")
        result = await hooked.invoke("orders.get", {"order_id": "o-1001"}, correlation_id=key)
        outcome = result.WhichOneof("outcome")
        after = await hooked.upstream_calls("GetOrder")
        if outcome == "completed":
            sent = answer.updated_input if answer.updated_input is not UNCHANGED else None
            expected = sent["order_id"] if isinstance(sent, dict) else "o-1001"
            assert orjson.loads(result.completed.output_json)["order_id"] == expected
            assert after == before + 1
            outcomes.add("completed")
        elif result.failed.code == types_pb2.ERROR_CODE_EXECUTION_FAILED:
            # A schema-valid update naming no order: the upstream ran it and refused it.
            assert isinstance(answer.updated_input, dict), (answer, result)
            assert answer.updated_input.get("order_id") not in KNOWN
            assert isinstance(answer.updated_input.get("order_id", ""), str)
            assert after == before + 1
            outcomes.add("upstream_refused")
        else:
            assert outcome == "failed", result
            assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_HOOK_FAILED"
            assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
            assert after == before
            outcomes.add("hook_failed")
    assert {"completed", "hook_failed"} <= outcomes  # the generator reached both sides
    ok = await hooked.invoke("orders.get", {"order_id": "o-1002"})
    assert ok.WhichOneof("outcome") == "completed", ok
