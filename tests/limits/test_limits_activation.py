"""Issue 26 (DESIGN §11): a call's CEL activation is built once per phase and reused by every
stage that evaluates an expression: the concealment check before the hooks, stage 7's
invocation policies and the limits' keys and amounts share the invocation one; stage 9 builds
the execution one (with `approval` and `limits`). Through the real gateway (real Redis, real
upstream, real CEL)."""

from __future__ import annotations

from typing import Any

import pytest

from policy.backends.celexpr import CelExprBackend
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]


async def test_one_refund_builds_one_activation_per_phase(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    original = CelExprBackend.activation

    def counting(self: CelExprBackend, bindings: dict[str, Any]) -> Any:
        built.append("execution" if "approval" in bindings else "invocation")
        return original(self, bindings)

    monkeypatch.setattr(CelExprBackend, "activation", counting)
    # orders.refund: an input-reading hide (invocation), keep-a-reserve (execution), and the
    # refund_rate and refund_budget limits (tests/limits/gateway.yaml, policies.yaml).
    done = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 10})
    assert done.WhichOneof("outcome") == "completed", done
    assert sorted(built) == ["execution", "invocation"]
