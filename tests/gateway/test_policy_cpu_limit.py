"""The policy time limit bounds the policy's own CPU time, not the scheduler's delay (issue 14 #7).

Through the real gateway, real CEL (cel-expr-python) and the real example upstream. Contention is
simulated the way it happens: the evaluating thread is off the CPU for longer than the 50 ms
limit while the policy runs (`time.sleep` after each real CEL evaluation — wall time passes, the
thread's CPU time does not). A policy that really spends its CPU budget still fails closed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from policy import Limits
from policy.backends.celexpr import CelExprBackend
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

DELAY_S = 0.08  # off-CPU per CEL program, longer than the whole 50 ms limit
assert Limits().cpu_time_s < DELAY_S

TRIVIAL = """
policies:
  - name: large-amounts-denied
    match: {capabilities: [orders.refund]}
    rules:
      - when: has(input.amount) && input.amount > 1000
        effect: deny
        message: Too large.
"""

# cel-cpp copies a list on each map(): two maps over 4,000 items cost about half a second of
# CPU (ten times the limit) and stay under the 10,000-iteration budget.
HEAVY = {
    "constants": {"big": list(range(4000))},
    "policies": [
        {
            "name": "expensive",
            "match": {"capabilities": ["orders.list"]},
            "rules": [
                {"when": "const.big.map(x, x + 1).map(x, x + 1).size() < 0", "effect": "deny"}
            ],
        }
    ],
}


@pytest.fixture(scope="module")
async def limited(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    root = Path(tempfile.mkdtemp(prefix="cg-"))
    policies = root / "policies"
    policies.mkdir()
    (policies / "trivial.yaml").write_text(TRIVIAL)
    (policies / "heavy.yaml").write_text(yaml.safe_dump(HEAVY))
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    (root / "gateway.yaml").write_text(yaml.safe_dump(data))
    environ = gateway_environ(orders_upstream, redis_server.url, str(root))
    memory = MemorySink()
    gw = await start(load_settings(root / "gateway.yaml", environ=environ), extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders_upstream, socket_path="")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


@pytest.fixture
def descheduled(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every CEL program runs for real, then its thread is off the CPU for DELAY_S."""
    real = CelExprBackend.run
    delays: list[float] = []

    def run(self: CelExprBackend, program: Any, activation: Any) -> bool | str:
        outcome = real(self, program, activation)
        time.sleep(DELAY_S)  # wall time passes, thread CPU time does not
        delays.append(DELAY_S)
        return outcome

    monkeypatch.setattr(CelExprBackend, "run", run)
    return delays


async def test_a_trivial_policy_delayed_by_the_scheduler_does_not_fail(
    limited: Env, descheduled: list[float]
) -> None:
    before = await limited.upstream_calls("RefundOrder")
    allowed = await limited.invoke("orders.refund", {"order_id": "o-1001", "amount": 5})
    assert descheduled, "the policy was evaluated under the injected delay"
    assert allowed.WhichOneof("outcome") == "completed", allowed
    assert await limited.upstream_calls("RefundOrder") == before + 1


async def test_a_trivial_deny_under_the_scheduler_delay_is_a_denial_not_a_failure(
    limited: Env, descheduled: list[float]
) -> None:
    denied = await limited.invoke("orders.refund", {"order_id": "o-1001", "amount": 5000})
    assert descheduled
    assert denied.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED, denied


async def test_a_policy_that_spends_its_cpu_budget_still_fails_closed(limited: Env) -> None:
    before = await limited.upstream_calls("ListOrders")
    result = await limited.invoke("orders.list", {"customer_id": "c-1"})
    assert result.failed.code == types_pb2.ERROR_CODE_POLICY_FAILED, result
    assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
    assert await limited.upstream_calls("ListOrders") == before
