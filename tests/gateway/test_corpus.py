"""Runs the pipeline corpus (corpus.yaml) in-process and against the real server over gRPC:
same envelope, same audit events in order, same number of upstream calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from capgate.v1 import gateway_pb2, types_pb2
from gateway.model import Actor
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call
from tests.gateway.harness import ACTORS, Env, subset, terminal_events

pytestmark = pytest.mark.integration

CASES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "corpus.yaml").read_text())[
    "cases"
]
SURFACES = {"agents": "agent", "local": "direct"}


def _raw(case: dict[str, Any]) -> bytes:
    if "raw_hex" in case:
        return bytes.fromhex(case["raw_hex"])
    if "raw" in case:
        return str(case["raw"]).encode()
    return orjson.dumps(case.get("input", {}))


def _actor(case: dict[str, Any], listener: str) -> Actor:
    name = case.get("actor", "alice")
    if name is None:
        return Actor(id="anonymous", kind="anonymous", issuer="local")
    a = ACTORS[name]
    return Actor(
        id=a["sub"],
        kind=a["kind"],
        issuer="test-idp" if listener == "agents" else "local",
        roles=tuple(a["roles"]),
    )


async def _run(env: Env, case: dict[str, Any], mode: str) -> gateway_pb2.ExecutionResult:
    listener = case.get("listener", "agents")
    if mode == "grpc":
        return await env.invoke(
            case["capability"], raw=_raw(case), actor=case.get("actor", "alice"), listener=listener
        )
    call = Call(
        snapshot=env.gw.holder.current,
        surface=SURFACES[listener],
        actor=_actor(case, listener),
        capability_id=case["capability"],
        raw_input=_raw(case),
    )
    return await pipeline.run(call, env.gw.runtime)


def _check_envelope(result: gateway_pb2.ExecutionResult, expect: dict[str, Any]) -> None:
    outcome = result.WhichOneof("outcome")
    assert outcome == expect["outcome"], result
    if outcome == "completed":
        output = orjson.loads(result.completed.output_json)
        assert subset(expect.get("output", {}), output), output
        for key, prefix in expect.get("output_prefix", {}).items():
            assert str(output[key]).startswith(prefix), output
        return
    if outcome == "approval_required":
        assert result.approval_required.approval.id
        return
    error = result.failed if outcome == "failed" else result.cancelled
    assert types_pb2.ErrorCode.Name(error.code) == f"ERROR_CODE_{expect['code']}", result
    for key in ("stage", "message", "retryable", "expose_to_model", "executed_before_failure"):
        if key in expect:
            assert getattr(error, key) == expect[key], (key, result)
    if "issues" in expect:
        assert [{"path": i.path, "message": i.message} for i in error.issues] == expect["issues"]
    if "state" in expect:
        assert (
            types_pb2.ExecutionState.Name(result.execution_state)
            == f"EXECUTION_STATE_{expect['state']}"
        )
    if "attempts" in expect:
        assert result.attempts == expect["attempts"]
    assert "SENTINEL" not in str(result)  # SI-10 / issue messages never echo values


@pytest.mark.parametrize("mode", ["inprocess", "grpc"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_corpus_case(env: Env, case: dict[str, Any], mode: str) -> None:
    await env.reset_upstream()
    result = await _run(env, case, mode)
    _check_envelope(result, case["expect"])
    assert await env.upstream_calls() == case["upstream_calls"]
    events = await env.events_for(result.execution_id)
    if "events" in case:
        assert [e["event"] for e in events] == case["events"]
    if "reason" in case:
        denied = [e for e in events if e["event"] == "capability.denied"]
        assert denied and denied[-1]["reason"] == case["reason"]
    for event in events:
        blob = orjson.dumps(event)
        assert b"SENTINEL" not in blob and b"o-1001" not in blob  # never payloads (SI-10)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_every_requested_execution_ends_in_exactly_one_terminal_event(
    env: Env, case: dict[str, Any]
) -> None:
    """The invariant over the whole corpus (issue 14 item 3): each `capability.requested` has
    exactly one terminal event, the last of its execution, carrying the stances."""
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    mark = len(env.audit.events)
    await _run(env, case, "grpc")
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    new = env.audit.events[mark:]
    ids = [e["execution_id"] for e in new if e["event"] == "capability.requested"]
    assert ids, case["name"]
    for execution_id in ids:
        events = await env.events_for(execution_id)
        assert [e["event"] for e in events].count("capability.requested") == 1
        ends = terminal_events(events)
        assert len(ends) == 1 and ends[0] is events[-1], [e["event"] for e in events]
        assert isinstance(ends[0]["stances"], list)
