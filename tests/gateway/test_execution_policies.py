"""Stage 9 — execution-phase policies, through the real server: evaluated after the approval
gate and before anything reaches the upstream; a capability that no execution-phase policy
applies to skips the stage (decided once per snapshot), one that some policy applies to never
does."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from policy import Phase
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

# Execution phase only: Check (stages 3-7) cannot see it, Invoke must enforce it at stage 9.
_POLICY = """
policies:
  - name: order-freeze
    description: Orders of the frozen range are not read at execution time.
    phases: [execution]
    match:
      capabilities: [orders.get]
    rules:
      - when: input.order_id.startsWith('o-9')
        effect: deny
        message: Orders o-9xxx are frozen.
  - name: listed-at-execution
    scope: capability
    phases: [execution]
    rules:
      - when: "input.order_id == 'o-1002'"
        effect: hide
"""


@pytest.fixture
async def exec_env(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[Env]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "90-exec.yaml").write_text(_POLICY)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    # Not the examples' policies: their approval-freshness is global in the execution phase.
    data["policies"]["paths"] = [str(tmp_path / "policies")]
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    data["capabilities"].append(
        {**get, "id": "orders.peek", "policies": ["listed-at-execution"], "tags": ["peek"]}
    )
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        config, environ=gateway_environ(orders_upstream, redis_server.url, run_dir)
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(
        gw=gw,
        audit=memory,
        orders_address=orders_upstream,
        socket_path=f"{run_dir}/capgate.sock",
    )
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


def _code(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code).removeprefix("ERROR_CODE_")


async def test_an_execution_phase_deny_stops_the_call_before_the_upstream(exec_env: Env) -> None:
    env = exec_env
    await env.reset_upstream()
    result = await env.invoke("orders.get", {"order_id": "o-9001"})
    assert _code(result) == "POLICY_DENIED"
    assert result.failed.message == "Orders o-9xxx are frozen."
    assert result.failed.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await env.upstream_calls() == 0
    # Check answers what Invoke would (ADR 0035): a call that would run meets stage 9 too.
    check = await env.gateway().Check(
        gateway_pb2.CheckRequest(capability_id="orders.get", input_json=b'{"order_id":"o-9001"}'),
        metadata=env.metadata("agents", "alice"),
    )
    assert check.decision == types_pb2.DECISION_DENY
    assert check.error.code == types_pb2.ERROR_CODE_POLICY_DENIED
    assert check.error.message == "Orders o-9xxx are frozen."
    ok = await env.invoke("orders.get", {"order_id": "o-1001"})
    assert ok.WhichOneof("outcome") == "completed", ok
    assert await env.upstream_calls() == 1


async def test_a_capability_scoped_execution_hide_answers_not_found(exec_env: Env) -> None:
    env = exec_env
    await env.reset_upstream()
    hidden = await env.invoke("orders.peek", {"order_id": "o-1002"})
    assert _code(hidden) == "CAPABILITY_NOT_FOUND"
    assert await env.upstream_calls() == 0
    shown = await env.invoke("orders.peek", {"order_id": "o-1001"})
    assert shown.WhichOneof("outcome") == "completed", shown


async def test_the_phases_that_apply_are_decided_once_per_snapshot(exec_env: Env) -> None:
    caps = exec_env.gw.holder.current.capabilities
    assert caps["orders.get"].policy_phases == frozenset({Phase.EXECUTION})
    assert caps["orders.peek"].policy_phases == frozenset({Phase.EXECUTION})
    assert caps["orders.refund"].policy_phases == frozenset()
