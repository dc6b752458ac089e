"""A keyed call whose input a pre-hook rewrote is still recognised when repeated (issue 25,
ADR 0034): the journal matches the input as the caller sent it as well as the input that ran,
also when the call ran through an approval and its Resume. Real gateway, hook server, Redis."""

from __future__ import annotations

import pytest
from capgate_client.hook import PreInvoke, PreInvokeResult

from tests.gateway.harness import Env
from tests.hooks.script import Script
from tests.hooks.test_hooks_pipeline import approve, cid

pytestmark = pytest.mark.integration

SENT = {"order_id": "o-1003", "amount": 20}


def _cap_amount(request: PreInvoke) -> PreInvokeResult:
    return PreInvokeResult(updated_input={**request.input, "amount": 7})


async def test_a_repeat_of_a_hook_rewritten_call_that_was_approved_replays(
    hooked: Env, script: Script
) -> None:
    key, correlation = cid(), cid()
    script.pre[correlation] = _cap_amount
    asked = await hooked.invoke(
        "orders.refund", SENT, idempotency_key=key, correlation_id=correlation
    )
    assert asked.WhichOneof("outcome") == "approval_required", asked
    approval = asked.approval_required.approval
    await approve(hooked, approval)
    resumed = await hooked.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    before = await hooked.upstream_calls("RefundOrder")
    # The caller repeats what it sent (amount 20); what ran was amount 7, by the Resume.
    again = await hooked.invoke("orders.refund", SENT, idempotency_key=key, correlation_id=cid())
    assert again == resumed  # not IDEMPOTENCY_CONFLICT, not a second approval
    assert await hooked.upstream_calls("RefundOrder") == before
