"""Every execution that emits `capability.requested` ends in exactly one terminal event carrying
each stance of each policy phase that ran (seed 001 "Which stages emit events", issue 14 item
3): a stage-9 deny keeps the invocation stances, an idempotent replay and a repeated Resume end
in one event marked as a replay, and an unexpected failure after the upstream answered says it
executed. Through the real server, real Redis, the real upstream and real CEL."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capgate.v1 import admin_pb2, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, terminal_events

pytestmark = pytest.mark.integration

# Execution phase (stage 9) beside the examples' invocation-phase policies.
_POLICY = """
policies:
  - name: frozen-orders
    description: The frozen order is not read at execution time.
    phases: [execution]
    match:
      capabilities: [orders.get]
    rules:
      - when: input.order_id == 'o-frozen'
        effect: deny
        message: This order is frozen.
"""


@pytest.fixture(scope="module")
async def trail(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    tmp = Path(tempfile.mkdtemp(prefix="cg-term-"))
    (tmp / "policies").mkdir()
    (tmp / "policies" / "90-frozen.yaml").write_text(_POLICY)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies"), str(tmp / "policies")]
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    # A redaction expression whose value has no JSON form (bytes, typed dyn so that the load
    # accepts it): a failure after the upstream answered (OUTPUT_INVALID, output withheld).
    data["capabilities"].append(
        {**get, "id": "orders.get-raw", "tags": ["raw"], "redact": {"output_expr": 'dyn(b"raw")'}}
    )
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        config, environ=gateway_environ(orders_upstream, redis_server.url, run_dir)
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/x.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


async def _mark(env: Env) -> int:
    """The trail's length once every event emitted so far has been written."""
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    return len(env.audit.events)


async def _executions_since(env: Env, mark: int) -> dict[str, list[dict[str, Any]]]:
    """Events of every execution whose `capability.requested` came after event `mark`."""
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    new = env.audit.events[mark:]
    ids = [e["execution_id"] for e in new if e["event"] == "capability.requested"]
    out: dict[str, list[dict[str, Any]]] = {}
    for execution_id in ids:
        out[execution_id] = await env.events_for(execution_id)
    return out


def _one_terminal(events: list[dict[str, Any]]) -> dict[str, Any]:
    ends = terminal_events(events)
    assert len(ends) == 1, [e["event"] for e in events]
    return ends[0]


def _by_phase(event: dict[str, Any]) -> dict[str, set[str]]:
    phases: dict[str, set[str]] = {}
    for stance in event["stances"]:
        phases.setdefault(stance["phase"], set()).add(stance["policy"])
    return phases


async def test_a_stage_9_deny_carries_the_invocation_and_the_execution_stances(
    trail: Env,
) -> None:
    result = await trail.invoke("orders.get", {"order_id": "o-frozen"})
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_POLICY_DENIED", result
    assert result.failed.message == "This order is frozen."
    events = await trail.events_for(result.execution_id)
    denied = _one_terminal(events)
    assert denied["event"] == "capability.denied"
    phases = _by_phase(denied)
    # anonymous-read-only is an invocation-phase policy of the examples (it abstains here).
    assert "anonymous-read-only" in phases["invocation"]
    assert {"frozen-orders", "approval-freshness"} <= phases["execution"]
    frozen = next(s for s in denied["stances"] if s["policy"] == "frozen-orders")
    assert frozen["effect"] == "deny"


async def test_a_completed_execution_carries_the_stances_of_both_phases(trail: Env) -> None:
    result = await trail.invoke("orders.get", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed", result
    completed = _one_terminal(await trail.events_for(result.execution_id))
    assert completed["event"] == "capability.completed"
    phases = _by_phase(completed)
    assert "anonymous-read-only" in phases["invocation"]
    assert "frozen-orders" in phases["execution"]
    assert "replayed" not in completed


async def test_an_idempotent_replay_ends_in_one_terminal_event_marked_as_replay(
    trail: Env,
) -> None:
    first = await trail.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="term-k1")
    assert first.WhichOneof("outcome") == "completed", first
    mark = await _mark(trail)
    again = await trail.invoke("orders.get", {"order_id": "o-1001"}, idempotency_key="term-k1")
    assert again == first  # the recorded envelope, as recorded
    runs = await _executions_since(trail, mark)
    assert len(runs) == 1, runs
    [(execution_id, events)] = runs.items()
    assert execution_id != first.execution_id
    end = _one_terminal(events)
    assert end["event"] == "capability.completed"
    assert end["replayed"] is True and end["replay_of"] == first.execution_id
    assert end["replay_source"] == "idempotency"
    assert end["execution_state"] == "COMPLETED"
    assert "capability.started" not in [e["event"] for e in events]  # nothing sent again
    # The journal answered before any policy ran (ADR 0034): a repeat is not an execution to
    # govern, so no policy gave a stance on it.
    assert end["stances"] == []


async def test_a_repeated_resume_ends_in_one_terminal_event_marked_as_replay(trail: Env) -> None:
    asked = await trail.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    assert asked.WhichOneof("outcome") == "approval_required", asked
    approval = asked.approval_required.approval
    requested = _one_terminal(await trail.events_for(asked.execution_id))
    assert requested["event"] == "capability.approval_requested"
    assert any(s["effect"] == "require-approval" for s in requested["stances"])
    decided = await trail.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="ok",
            input_hash=approval.input_hash,
        ),
        metadata=trail.metadata("admin", "bob"),
    )
    assert not decided.HasField("error"), decided
    resumed = await trail.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    done = _one_terminal(await trail.events_for(resumed.execution_id))
    assert done["event"] == "capability.completed" and "replayed" not in done
    mark = await _mark(trail)
    repeated = await trail.resume(approval.id)
    assert repeated == resumed
    runs = await _executions_since(trail, mark)
    assert len(runs) == 1, runs
    [(_, events)] = runs.items()
    end = _one_terminal(events)
    assert end["event"] == "capability.completed"
    assert end["replayed"] is True and end["replay_of"] == resumed.execution_id
    assert end["replay_source"] == "approval"
    assert end["approval_id"] == approval.id


async def test_an_unexpected_failure_after_the_upstream_answered_says_it_executed(
    trail: Env,
) -> None:
    await trail.reset_upstream()
    result = await trail.invoke("orders.get-raw", {"order_id": "o-1001"})
    assert await trail.upstream_calls() == 1
    assert result.WhichOneof("outcome") == "failed", result
    assert result.failed.executed_before_failure, result
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert result.failed.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert not result.completed.output_json  # withheld
    end = _one_terminal(await trail.events_for(result.execution_id))
    assert end["event"] == "capability.failed"
    assert end["executed_before_failure"] is True
    assert end["execution_state"] == "COMPLETED"


async def test_a_replayed_failure_ends_in_its_codes_event_marked_as_replay(trail: Env) -> None:
    first = await trail.invoke(
        "orders.get", {"order_id": "fail-INTERNAL"}, idempotency_key="term-fail-1"
    )
    assert first.failed.code == types_pb2.ERROR_CODE_EXECUTION_FAILED, first
    original = _one_terminal(await trail.events_for(first.execution_id))
    assert original["event"] == "capability.failed" and "replayed" not in original
    mark = await _mark(trail)
    again = await trail.invoke(
        "orders.get", {"order_id": "fail-INTERNAL"}, idempotency_key="term-fail-1"
    )
    assert again == first
    [(_, events)] = (await _executions_since(trail, mark)).items()
    end = _one_terminal(events)
    assert end["event"] == "capability.failed"
    assert (end["code"], end["stage"]) == ("EXECUTION_FAILED", first.failed.stage)
    assert end["replayed"] is True and end["replay_of"] == first.execution_id
    assert end["execution_state"] == original["execution_state"]
