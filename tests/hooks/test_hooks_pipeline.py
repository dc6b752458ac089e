"""Governance hooks through the real server (docs/hooks.md, ADR 0027): a real gateway on
loopback, real Redis, the example upstream, and real hook servers (capgate_client.hook serving
the reference `standing` hook and the scripted `guard`; a hook subprocess that crashes)."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import orjson
import pytest
from capgate_client.hook import PostInvokeResult, PreInvoke, PreInvokeResult

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from gateway.telemetry import metrics
from gateway.values.canonical import input_hash
from tests.gateway.harness import Env, terminal_events
from tests.hooks.script import Script

pytestmark = pytest.mark.integration

FAILED = types_pb2.EXECUTION_STATE_NOT_STARTED


def cid() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def code_of(result: gateway_pb2.ExecutionResult) -> str:
    outcome = result.WhichOneof("outcome")
    error = result.failed if outcome == "failed" else result.cancelled
    return types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")


async def terminal(env: Env, execution_id: str) -> dict[str, Any]:
    events = terminal_events(await env.events_for(execution_id))
    assert len(events) == 1, events
    return events[0]


async def approve(env: Env, approval: types_pb2.Approval) -> None:
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="ok",
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
    )
    assert decided.approval.status == types_pb2.APPROVAL_STATUS_APPROVED, decided


async def test_the_standing_hooks_context_reaches_a_policy(hooked: Env) -> None:
    good = await hooked.invoke("orders.refund", {"order_id": "o-1001", "amount": 5})
    assert good.WhichOneof("outcome") == "completed", good
    late = await hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 5})
    assert late.WhichOneof("outcome") == "approval_required", late
    assert list(late.approval_required.approval.reasons) == ["Customer in arrears."]
    event = await terminal(hooked, late.execution_id)
    standing = [h for h in event["hooks"] if h["hook"] == "standing"]
    assert [(h["call"], h["decision"]) for h in standing] == [("pre_invoke", "none")]
    assert standing[0]["duration_ms"] >= 0 and "error" not in standing[0]
    # Payload-free: neither the context values nor the input are in the trail (SI-10).
    trail = orjson.dumps(event)
    assert b'"basic"' not in trail and b"o-1003" not in trail


async def test_a_hooks_allow_never_overrides_a_policy_deny_or_approval(
    hooked: Env, script: Script
) -> None:
    allow = PreInvokeResult(decision="allow")
    # A deny by a policy that reads the hook's context: the hook ran, and allowed, in vain.
    key = cid()
    script.pre[key] = allow
    denied = await hooked.invoke(
        "orders.refund", {"order_id": "o-1003", "amount": 6000}, correlation_id=key
    )
    assert code_of(denied) == "POLICY_DENIED", denied
    assert "basic-tier" in denied.failed.message
    assert script.calls("pre", execution_id=denied.execution_id)
    # An approval requirement stays one.
    key = cid()
    script.pre[key] = allow
    asked = await hooked.invoke(
        "orders.refund", {"order_id": "o-1003", "amount": 6}, correlation_id=key
    )
    assert asked.WhichOneof("outcome") == "approval_required", asked
    # A deny by a policy that never reads hooks is decided before any hook is called.
    key = cid()
    script.pre[key] = allow
    before = await hooked.upstream_calls("RefundOrder")
    hard = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 20000}, correlation_id=key
    )
    assert code_of(hard) == "POLICY_DENIED", hard
    assert script.calls("pre", execution_id=hard.execution_id) == []
    assert await hooked.upstream_calls("RefundOrder") == before


async def test_a_hooks_deny_and_ask(hooked: Env, script: Script) -> None:
    key = cid()
    script.pre[key] = PreInvokeResult(decision="deny", message="Fraud check refused this.")
    before = await hooked.upstream_calls("RefundOrder")
    denied = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 3}, correlation_id=key
    )
    assert code_of(denied) == "HOOK_DENIED"
    assert denied.failed.message == "Fraud check refused this."
    assert denied.failed.stage == "hook" and not denied.failed.retryable
    assert denied.execution_state == FAILED
    assert await hooked.upstream_calls("RefundOrder") == before
    event = await terminal(hooked, denied.execution_id)
    assert event["event"] == "capability.denied" and event["code"] == "HOOK_DENIED"
    assert any(h["hook"] == "guard" and h["decision"] == "deny" for h in event["hooks"])
    # An ask joins the approval requirement of a call no policy asked for.
    key = cid()
    script.pre[key] = PreInvokeResult(decision="ask", message="A second look, please.")
    asked = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 3}, correlation_id=key
    )
    assert asked.WhichOneof("outcome") == "approval_required", asked
    assert list(asked.approval_required.approval.reasons) == ["A second look, please."]
    # ... and is merged with a policy's (both reasons; the policy's approver roles).
    key = cid()
    script.pre[key] = PreInvokeResult(decision="ask", message="A second look, please.")
    both = await hooked.invoke(
        "orders.refund", {"order_id": "o-1003", "amount": 3}, correlation_id=key
    )
    reasons = list(both.approval_required.approval.reasons)
    assert reasons == ["Customer in arrears.", "A second look, please."]


async def test_updated_input_is_validated_bound_to_the_approval_and_executed_on_resume(
    hooked: Env, script: Script
) -> None:
    key = cid()

    def cap_amount(request: PreInvoke) -> PreInvokeResult:
        return PreInvokeResult(updated_input={**request.input, "amount": 7})

    script.pre[key] = cap_amount
    asked = await hooked.invoke(
        "orders.refund", {"order_id": "o-1003", "amount": 20}, correlation_id=key
    )
    assert asked.WhichOneof("outcome") == "approval_required", asked
    approval = asked.approval_required.approval
    updated = {"order_id": "o-1003", "amount": 7, "reason": "unspecified"}  # schema default
    assert approval.input_hash == input_hash(updated)
    event = await terminal(hooked, asked.execution_id)
    original = {"order_id": "o-1003", "amount": 20, "reason": "unspecified"}
    assert event["input_update"] == {
        "hooks": ["guard"],
        "before": input_hash(original),
        "after": input_hash(updated),
    }
    await approve(hooked, approval)
    before = await hooked.upstream_calls("RefundOrder")
    resumed = await hooked.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed
    assert orjson.loads(resumed.completed.output_json)["amount"] == 7  # what the upstream got
    assert await hooked.upstream_calls("RefundOrder") == before + 1
    # The pre-hooks ran again on Resume, on the stored (updated) input.
    again = script.calls("pre", execution_id=resumed.execution_id)
    assert [(r.payload["amount"], r.call.approval_id) for r in again] == [(7, approval.id)]
    event = await terminal(hooked, resumed.execution_id)
    assert [h["hook"] for h in event["hooks"] if h["call"] == "pre_invoke"] == [
        "standing",
        "guard",
    ]


async def test_a_rerun_hook_that_changes_the_approved_input_is_refused(
    hooked: Env, script: Script
) -> None:
    asked = await hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 9})
    approval = asked.approval_required.approval
    await approve(hooked, approval)
    script.on_resume[approval.id] = PreInvokeResult(
        updated_input={"order_id": "o-1003", "amount": 1}
    )
    before = await hooked.upstream_calls("RefundOrder")
    resumed = await hooked.resume(approval.id)
    assert code_of(resumed) == "APPROVAL_INPUT_MISMATCH", resumed
    assert resumed.execution_state == FAILED
    assert await hooked.upstream_calls("RefundOrder") == before
    # An updated input that hashes the same (a re-run hook returning the approved value) runs.
    asked = await hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 8})
    approval = asked.approval_required.approval
    await approve(hooked, approval)
    same = {"order_id": "o-1003", "amount": 8, "reason": "unspecified"}
    script.on_resume[approval.id] = PreInvokeResult(updated_input=same)
    resumed = await hooked.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed", resumed


@pytest.mark.parametrize(
    "answer",
    [
        PreInvokeResult(updated_input={"order_id": "o-1001", "amount": -5}),  # schema
        PreInvokeResult(updated_input=["not", "an", "object"]),
        PreInvokeResult(context={"undeclared": True}),  # guard declares no context
    ],
    ids=["schema", "not-object", "undeclared-context"],
)
async def test_an_invalid_answer_fails_closed_and_nothing_runs(
    hooked: Env, script: Script, answer: PreInvokeResult
) -> None:
    key = cid()
    script.pre[key] = answer
    before = await hooked.upstream_calls("RefundOrder")
    result = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 2}, correlation_id=key
    )
    assert code_of(result) == "HOOK_FAILED", result
    assert result.failed.message == "A governance check could not be completed."
    assert result.execution_state == FAILED and result.failed.retryable
    assert await hooked.upstream_calls("RefundOrder") == before
    event = await terminal(hooked, result.execution_id)
    assert event["reason"].startswith("hook guard: ")
    assert next(h for h in event["hooks"] if h["hook"] == "guard")["error"]


async def test_a_slow_pre_hook_fails_closed_within_its_deadline(
    hooked: Env, script: Script
) -> None:
    key = cid()
    script.pre[key] = "slow"  # sleeps 30 s; the guard's timeout is 300 ms
    before = await hooked.upstream_calls("GetOrder")
    result = await hooked.invoke(
        "orders.get", {"order_id": "o-1001"}, correlation_id=key, rpc_timeout=10
    )
    assert code_of(result) == "HOOK_FAILED", result
    assert result.execution_state == FAILED
    assert await hooked.upstream_calls("GetOrder") == before
    event = await terminal(hooked, result.execution_id)
    guard = next(h for h in event["hooks"] if h["hook"] == "guard")
    assert guard["error"] == "status DEADLINE_EXCEEDED"


async def test_the_callers_deadline_bounds_every_hook(hooked: Env) -> None:
    # `patient` may take 60 s and sleeps that long; the caller allows 3 s: the gateway still
    # answers with its envelope before the caller's own deadline expires.
    try:
        result = await hooked.invoke("orders.patient", {"order_id": "o-1001"}, rpc_timeout=3)
    except grpc.aio.AioRpcError as err:  # pragma: no cover - the defect this guards against
        pytest.fail(f"the caller's deadline expired first: {err.code()}")
    assert code_of(result) == "HOOK_FAILED", result


async def test_a_crashing_hook_process_fails_closed(hooked: Env) -> None:
    before = await hooked.upstream_calls("GetOrder")
    for _ in range(2):  # the crash itself, then a hook that is gone
        result = await hooked.invoke("orders.crashy", {"order_id": "o-1001"})
        assert code_of(result) == "HOOK_FAILED", result
        assert result.execution_state == FAILED
    assert await hooked.upstream_calls("GetOrder") == before


async def test_a_failing_open_hook_is_recorded_and_ignored(hooked: Env) -> None:
    result = await hooked.invoke("orders.optional", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed", result
    event = await terminal(hooked, result.execution_id)
    optional = next(h for h in event["hooks"] if h["hook"] == "optional")
    assert optional["error"] == "status UNKNOWN"


async def test_a_post_hooks_invalid_output_is_withheld(hooked: Env, script: Script) -> None:
    key = cid()
    script.post[key] = PostInvokeResult(updated_output={"nope": True})
    result = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 1}, correlation_id=key
    )
    assert code_of(result) == "OUTPUT_INVALID", result
    assert result.failed.executed_before_failure
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert "nope" not in result.SerializeToString().decode("utf-8", "replace")


async def test_a_post_hooks_output_is_validated_then_redacted(hooked: Env, script: Script) -> None:
    key = cid()

    def rewrite(request: Any) -> PostInvokeResult:
        return PostInvokeResult(
            updated_output={**request.output, "customer_email": "changed@example.com"}
        )

    script.post[key] = rewrite
    result = await hooked.invoke(
        "orders.refund", {"order_id": "o-1001", "amount": 1}, correlation_id=key
    )
    assert result.WhichOneof("outcome") == "completed", result
    output = orjson.loads(result.completed.output_json)
    seen = script.calls("post", execution_id=result.execution_id)[0].payload
    assert seen["card_last4"] == "4242"  # the hook sees the validated output, unredacted
    assert output["customer_email"] != "changed@example.com"  # stage 13 redacted the change
    assert output["customer_email"].startswith("hmac")
    assert output["card_last4"] != "4242"


async def test_post_failure_hooks_observe_every_terminal_failure_kind(
    hooked: Env, script: Script
) -> None:
    deny_key = cid()
    script.pre[deny_key] = PreInvokeResult(decision="deny")
    rejected = await hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 4})
    approval = rejected.approval_required.approval
    decided = await hooked.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id, verdict=admin_pb2.VERDICT_REJECT, note="no"
        ),
        metadata=hooked.metadata("admin", "bob"),
    )
    assert decided.approval.status == types_pb2.APPROVAL_STATUS_REJECTED
    results = [
        await hooked.invoke("orders.refund", {"order_id": "o-1001", "amount": 20000}),
        await hooked.invoke(
            "orders.refund", {"order_id": "o-1001", "amount": 4}, correlation_id=deny_key
        ),
        await hooked.invoke("orders.refund", {"order_id": "o-1001", "amount": "lots"}),
        await hooked.invoke("orders.refund", {"order_id": "fail-INTERNAL", "amount": 4}),
        await hooked.invoke("orders.cancel", {"order_id": "slow-5000", "reason": "x"}),
        await hooked.resume(approval.id),
    ]
    codes = [code_of(r) for r in results]
    assert codes == [
        "POLICY_DENIED",
        "HOOK_DENIED",
        "INPUT_INVALID",
        "EXECUTION_FAILED",
        "TIMEOUT",
        "APPROVAL_REJECTED",
    ]
    assert {r.WhichOneof("outcome") for r in results} == {"failed", "cancelled"}
    for result, code in zip(results, codes, strict=True):
        seen = script.calls("failure", execution_id=result.execution_id)
        error = result.failed if result.WhichOneof("outcome") == "failed" else result.cancelled
        state = types_pb2.ExecutionState.Name(result.execution_state)
        assert [r.payload for r in seen] == [
            (code, error.stage, state.removeprefix("EXECUTION_STATE_"))
        ], code
        event = await terminal(hooked, result.execution_id)
        assert any(h["call"] == "post_failure" for h in event["hooks"]), code


async def test_a_hidden_or_unexposed_capability_never_reaches_a_hook(
    hooked: Env, script: Script
) -> None:
    unknown = await hooked.invoke("orders.nonexistent", {"order_id": "o-1001"})
    cases = [
        await hooked.invoke("orders.get", {"order_id": "o-1001"}, actor="bot"),  # input-free
        await hooked.invoke("orders.get", {"order_id": "o-secret"}),  # reads input, not hooks
        await hooked.invoke("orders.unexposed", {"order_id": "o-1001"}),  # matches `orders.*`
    ]
    for result in cases:
        assert code_of(result) == "CAPABILITY_NOT_FOUND", result
        assert result.failed == unknown.failed  # concealed exactly (SI-8)
        assert script.calls(execution_id=result.execution_id) == []
        event = await terminal(hooked, result.execution_id)
        assert "hooks" not in event


async def test_check_runs_the_pre_hooks_as_a_dry_run(hooked: Env, script: Script) -> None:
    response = await hooked.gateway().Check(
        gateway_pb2.CheckRequest(
            capability_id="orders.refund",
            input_json=orjson.dumps({"order_id": "o-1003", "amount": 5}),
        ),
        metadata=hooked.metadata("agents", "alice"),
    )
    assert response.decision == types_pb2.DECISION_REQUIRE_APPROVAL, response
    assert list(response.approval_reasons) == ["Customer in arrears."]
    dry = [r for r in script.received if r.rpc == "pre" and r.call.dry_run]
    assert [(r.hook, r.call.execution_id) for r in dry] == [("guard", "")]


async def test_hook_calls_are_counted_with_bounded_labels(hooked: Env) -> None:
    labels = ("standing", "pre_invoke", "ok")
    before = metrics.hook_duration.count(labels)
    await hooked.invoke("orders.refund", {"order_id": "o-1001", "amount": 1})
    assert metrics.hook_duration.count(labels) == before + 1
