"""Span trees per outcome (DESIGN §9), read from an in-memory exporter: one SERVER span per RPC,
`agent.capability_call` under it, stage-group spans under that, and one CLIENT span
`agent.procedure_execution` per upstream attempt; W3C context from the caller, to the upstream."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from capgate.v1 import admin_pb2, gateway_pb2, types_pb2
from tests.audit.kit import Stack

pytestmark = pytest.mark.integration

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def tree(spans: list[ReadableSpan]) -> list[tuple[int, str, SpanKind]]:
    """(depth, name, kind) in start order, depth from the trace's first span."""
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: ReadableSpan) -> int:
        parent = span.parent
        return (
            0 if parent is None or parent.span_id not in by_id else 1 + depth(by_id[parent.span_id])
        )

    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    return [(depth(s), s.name, s.kind) for s in ordered]


def attrs(spans: list[ReadableSpan], name: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in spans if s.name == name]


SERVER = (0, "capgate.v1.CapabilityGateway/Invoke", SpanKind.SERVER)
ROOT = (1, "agent.capability_call", SpanKind.INTERNAL)
POLICY = (2, "agent.policy_evaluation", SpanKind.INTERNAL)
UPSTREAM = (2, "agent.procedure_execution", SpanKind.CLIENT)


async def test_a_completed_call_is_server_root_policy_and_one_client_span(audited: Stack) -> None:
    result = await audited.env.invoke("orders.get", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed"
    spans = audited.spans_of(result.execution_id)
    assert tree(spans) == [SERVER, ROOT, POLICY, POLICY, UPSTREAM]
    root = attrs(spans, "agent.capability_call")[0]
    assert root["capgate.capability_id"] == "orders.get"
    assert root["capgate.surface"] == "agent"
    assert root["capgate.outcome"] == "completed"
    assert root["capgate.attempts"] == 1
    assert root["capgate.revision"] == audited.env.gw.holder.current.revision
    assert "capgate.code" not in root
    client = attrs(spans, "agent.procedure_execution")[0]
    assert client["rpc.method"] == "GetOrder"
    assert client["capgate.attempt"] == 1
    server = attrs(spans, SERVER[1])[0]
    assert server["rpc.system"] == "grpc"
    assert server["rpc.grpc.status_code"] == 0


async def test_each_retry_is_its_own_client_span_under_one_execution(audited: Stack) -> None:
    result = await audited.env.invoke("orders.get", {"order_id": "flaky-1-spans"})
    assert result.WhichOneof("outcome") == "completed"
    assert result.attempts == 2
    spans = audited.spans_of(result.execution_id)
    clients = [s for s in spans if s.name == "agent.procedure_execution"]
    assert [dict(s.attributes or {})["capgate.attempt"] for s in clients] == [1, 2]
    assert clients[0].status.status_code is StatusCode.ERROR
    assert dict(clients[0].attributes or {})["capgate.code"] == "UPSTREAM_UNAVAILABLE"
    assert clients[1].status.status_code is StatusCode.UNSET
    assert attrs(spans, "agent.capability_call")[0]["capgate.attempts"] == 2


async def test_a_policy_denial_has_no_client_span_and_an_error_root(audited: Stack) -> None:
    result = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 20000})
    assert result.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED
    spans = audited.spans_of(result.execution_id)
    assert tree(spans) == [SERVER, ROOT, POLICY]
    root = next(s for s in spans if s.name == "agent.capability_call")
    assert root.status.status_code is StatusCode.ERROR
    assert dict(root.attributes or {})["capgate.code"] == "POLICY_DENIED"
    policy = attrs(spans, "agent.policy_evaluation")[0]
    assert policy["capgate.policy.decision"] == "deny"
    assert policy["capgate.policy.phase"] == "invocation"


async def test_a_concealed_capability_traces_like_an_unknown_one(audited: Stack) -> None:
    hidden = await audited.env.invoke("admin.orders.purge", {})
    unknown = await audited.env.invoke("orders.nope", {})
    hidden_tree = tree(audited.spans_of(hidden.execution_id))
    unknown_tree = tree(audited.spans_of(unknown.execution_id))
    # Hidden by an input-free policy at stage 4 (ADR 0016), which opens no span of its own.
    assert hidden_tree == unknown_tree == [SERVER, ROOT]
    for result in (hidden, unknown):
        root = attrs(audited.spans_of(result.execution_id), "agent.capability_call")[0]
        assert root["capgate.code"] == "CAPABILITY_NOT_FOUND"


async def test_an_approval_request_ends_ok_with_its_own_span(audited: Stack) -> None:
    result = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    assert result.WhichOneof("outcome") == "approval_required"
    spans = audited.spans_of(result.execution_id)
    assert tree(spans) == [SERVER, ROOT, POLICY, (2, "agent.approval_request", SpanKind.INTERNAL)]
    root = next(s for s in spans if s.name == "agent.capability_call")
    assert root.status.status_code is StatusCode.UNSET
    assert dict(root.attributes or {})["capgate.outcome"] == "approval_required"
    approval = attrs(spans, "agent.approval_request")[0]
    assert approval["capgate.approval_id"] == result.approval_required.approval.id


async def test_a_timeout_ends_the_client_span_and_the_root_in_error(audited: Stack) -> None:
    result = await audited.env.invoke("orders.cancel", {"order_id": "slow-1500"})
    assert result.WhichOneof("outcome") == "cancelled"
    spans = audited.spans_of(result.execution_id)
    client = next(s for s in spans if s.name == "agent.procedure_execution")
    assert client.kind is SpanKind.CLIENT
    assert client.status.status_code is StatusCode.ERROR
    root = attrs(spans, "agent.capability_call")[0]
    assert root["capgate.outcome"] == "cancelled"
    assert root["capgate.code"] == "TIMEOUT"


async def test_the_callers_trace_continues_and_the_client_span_is_sent_upstream(
    audited: Stack,
) -> None:
    env = audited.env
    await env.reset_upstream()
    caller = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    result = await env.gateway().Invoke(
        gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=b'{"order_id":"o-1001"}'),
        metadata=[
            *env.metadata("agents", "alice"),
            ("traceparent", caller),
            ("tracestate", "vendor=abc"),
        ],
    )
    spans = audited.spans_of(result.execution_id)
    assert all(f"{s.context.trace_id:032x}" == CALLER_TRACE for s in spans)
    server = next(s for s in spans if s.kind is SpanKind.SERVER)
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == CALLER_SPAN
    client = next(s for s in spans if s.name == "agent.procedure_execution")
    sent = (await env.stats()).log[-1].traceparent
    assert sent == f"00-{CALLER_TRACE}-{client.context.span_id:016x}-01"


async def test_an_unsampled_caller_gets_no_spans_but_its_trace_id_travels_on(
    audited: Stack,
) -> None:
    env = audited.env
    await env.reset_upstream()
    before = len(audited.spans.get_finished_spans())
    caller = f"00-{CALLER_TRACE[::-1]}-{CALLER_SPAN}-00"
    result = await env.gateway().Invoke(
        gateway_pb2.InvokeRequest(capability_id="orders.get", input_json=b'{"order_id":"o-1001"}'),
        metadata=[*env.metadata("agents", "alice"), ("traceparent", caller)],
    )
    assert result.WhichOneof("outcome") == "completed"
    assert len(audited.spans.get_finished_spans()) == before  # parent-based: nothing sampled
    sent = (await env.stats()).log[-1].traceparent
    assert sent.startswith(f"00-{CALLER_TRACE[::-1]}-")
    assert sent.endswith("-00")
    assert sent == caller  # unsampled: the gateway builds no span and passes the context on


async def test_a_resumed_execution_links_to_the_trace_that_requested_the_approval(
    audited: Stack,
) -> None:
    env = audited.env
    asked = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 700})
    approval = asked.approval_required.approval
    decided = await env.admin().DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            input_hash=approval.input_hash,
        ),
        metadata=env.metadata("admin", "bob"),
    )
    assert not decided.HasField("error")
    resumed = await env.resume(approval.id)
    assert resumed.WhichOneof("outcome") == "completed"
    requested_root = next(
        s for s in audited.spans_of(asked.execution_id) if s.name == "agent.capability_call"
    )
    root = next(
        s for s in audited.spans_of(resumed.execution_id) if s.name == "agent.capability_call"
    )
    assert [link.context.span_id for link in root.links] == [requested_root.context.span_id]
    assert dict(root.attributes or {})["capgate.approval_id"] == approval.id
    names = [name for _, name, _ in tree(audited.spans_of(resumed.execution_id))]
    assert names.count("agent.approval_request") == 2  # load and consume
    assert names.count("agent.procedure_execution") == 1
