"""What ApprovalAdmin tells an inbox beyond the record (issue 17): the capability's description,
whom an agent acts for (a JWT listener's on_behalf_of_claim: `act.sub`, as
tests/gateway/gateway.yaml sets it; kept with the approval) and whether the gateway refuses
self-approval. Through the real gateway, its real JWT listener and a real Redis; the admin calls
over loopback gRPC."""

from __future__ import annotations

import grpc
import orjson
import pytest

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.model import Actor
from gateway.state.approvals.convert import MAX_DESCRIPTION, to_proto
from gateway.state.approvals.records import actor_from, actor_json
from gateway.transport.auth.jwt import MAX_ON_BEHALF_OF
from tests.approvals.approvalkit import new_record
from tests.gateway.harness import token
from tests.inbox.inboxkit import Stack

pytestmark = pytest.mark.integration


async def _events_until(stack: Stack, approval_id: str) -> admin_pb2.ApprovalEvent:
    """The `requested` event of `approval_id` on a WatchApprovals stream from the start."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{stack.gw.ports()['admin']}") as channel:
        stub = admin_pb2_grpc.ApprovalAdminStub(channel)
        md = [("authorization", f"Bearer {token('auditor', audience='capgate-admin')}")]
        stream = stub.WatchApprovals(
            admin_pb2.WatchApprovalsRequest(after_event_id="0-0"), metadata=md, timeout=10
        )
        async for event in stream:
            if event.approval.id == approval_id and event.type == "requested":
                stream.cancel()
                return event
    raise LookupError(approval_id)


async def test_an_agents_principal_and_the_description_travel_with_the_approval(
    stack: Stack,
) -> None:
    asked = await stack.request(
        "orders.bulk_refund",
        {"customer": "c-90", "orders": [{"order_id": "o-9001", "amount": 12}]},
        actor="bot",
        act={"sub": "alice@example.com", "iss": "https://idp.example"},
    )
    listed = await stack.approval(asked.id)
    assert listed.requester.kind == "agent"
    assert listed.requester_on_behalf_of == "alice@example.com"
    assert listed.capability_description == "Refund several orders of one customer at once."
    assert listed.self_approval_refused is True  # the gateway's approvals.reject_self_approval
    event = await _events_until(stack, asked.id)
    assert event.approval.requester_on_behalf_of == "alice@example.com"
    assert event.approval.capability_description == listed.capability_description
    assert event.approval.self_approval_refused is True
    # The requester's own view (Invoke's approval_required) carries none of it.
    assert asked.requester_on_behalf_of == "" and asked.capability_description == ""

    # Without an act claim nothing is said, and nothing is made up.
    plain = await stack.request_refund(620, "o-9002")
    assert (await stack.approval(plain.id)).requester_on_behalf_of == ""


@pytest.mark.parametrize(
    "act",
    [{"sub": 7}, {"sub": ""}, {"sub": ["alice"]}, {"sub": "a" * (MAX_ON_BEHALF_OF + 1)}],
    ids=["number", "empty", "list", "too long"],
)
async def test_an_on_behalf_of_claim_of_the_wrong_shape_refuses_the_token(
    stack: Stack, act: dict[str, object]
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stack.invoke("orders.refund", {"order_id": "o-9003", "amount": 630}, act=act)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # The gateway keeps serving: the same call with a well-formed claim suspends for approval.
    longest = "b" * MAX_ON_BEHALF_OF
    asked = await stack.request_refund(630, "o-9003", act={"sub": longest})
    assert (await stack.approval(asked.id)).requester_on_behalf_of == longest


def test_the_description_is_bounded_and_old_records_read_without_a_principal() -> None:
    record = new_record(lambda: 1_700_000_000.0)
    shown = to_proto(record, include_input=True, description="d" * 5000)
    assert shown.capability_description == "d" * MAX_DESCRIPTION
    assert to_proto(record, description="x").capability_description == ""  # requester's view
    # A record written before the principal was kept has no on_behalf_of key.
    old = orjson.loads(actor_json(Actor(id="bot", kind="agent", issuer="idp")))
    assert "on_behalf_of" not in old
    assert actor_from(orjson.dumps(old)).on_behalf_of == ""
    kept = Actor(id="bot", kind="agent", issuer="idp", on_behalf_of="alice")
    assert actor_from(actor_json(kept)) == kept
    assert isinstance(shown, types_pb2.Approval)
