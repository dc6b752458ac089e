"""ApprovalAdmin over real gRPC (grpc.aio on loopback) and the `capgate approvals` CLI."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import orjson
import pytest
import redis.asyncio as aioredis
from approvalkit import ALICE, BOB, CAROL, FakeClock, new_record

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.cli.approvals import main as cli
from gateway.config.settings import Listener
from gateway.model import Actor, RedactRule
from gateway.state.approvals import RedisApprovalStore
from gateway.state.approvals.convert import actor_to_proto, to_proto
from gateway.transport.admin.approvals import ApprovalAdminServicer
from gateway.transport.auth.base import AuthenticationFailed
from gateway.values.redact import Redactor

pytestmark = pytest.mark.integration

ISSUER = "https://idp.example"
AUDITOR = Actor(id="audrey", kind="user", issuer=ISSUER, roles=("auditor",))
INBOX = Actor(id="inbox", kind="service", issuer=ISSUER)
LISTENER = Listener(
    name="admin",
    address="127.0.0.1:0",
    surface="admin",
    role="admin",
    on_behalf_of=((ISSUER, "inbox"),),
)


def _spec(actor: Actor) -> str:
    return f"{actor.issuer}|{actor.id}|{','.join(actor.roles)}"


def _authenticate(context: grpc.aio.ServicerContext[Any, Any]) -> Actor:
    """Test identity: `x-test-actor: issuer|id|roles` or `authorization: Bearer <same>`."""
    metadata = dict(context.invocation_metadata() or ())
    spec = str(metadata.get("x-test-actor") or metadata.get("authorization", "")).removeprefix(
        "Bearer "
    )
    if spec.count("|") != 2:
        raise AuthenticationFailed("missing credentials")
    issuer, actor_id, roles = spec.split("|")
    kind = "service" if actor_id == "inbox" else "user"
    return Actor(id=actor_id, kind=kind, issuer=issuer, roles=tuple(filter(None, roles.split(","))))


def _view(record: Any) -> types_pb2.Approval:
    return to_proto(record, include_input=True, redactor=Redactor([RedactRule("$.card", "mask")]))


@pytest.fixture
async def admin(store: RedisApprovalStore) -> AsyncIterator[tuple[str, RedisApprovalStore]]:
    server = grpc.aio.server()
    admin_pb2_grpc.add_ApprovalAdminServicer_to_server(
        ApprovalAdminServicer(store, authenticate=_authenticate, listener=LISTENER, view=_view),
        server,
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", store
    await server.stop(None)


@pytest.fixture
async def stub(admin: tuple[str, RedisApprovalStore]) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(admin[0]) as channel:
        yield admin_pb2_grpc.ApprovalAdminStub(channel)


def _as(actor: Actor) -> tuple[tuple[str, str], ...]:
    return (("x-test-actor", _spec(actor)),)


async def _ids(stub: Any, actor: Actor, **kw: Any) -> list[str]:
    reply = await stub.ListApprovals(admin_pb2.ListApprovalsRequest(**kw), metadata=_as(actor))
    assert not reply.HasField("error")
    return [a.id for a in reply.approvals]


async def test_approvers_list_only_what_they_may_decide_and_auditors_see_all(
    stub: Any, store: RedisApprovalStore, clock: FakeClock
) -> None:
    dave = Actor(id="dave", kind="user", issuer=ISSUER)
    plain = await store.create(new_record(clock, requester=dave))
    finance = await store.create(new_record(clock, roles=("approver", "finance")))
    requester = dataclasses.replace(ALICE, roles=("approver",))
    own = await store.create(new_record(clock, requester=requester))
    assert set(await _ids(stub, BOB)) == {plain.id, own.id}
    assert set(await _ids(stub, CAROL)) == {plain.id, finance.id, own.id}
    assert set(await _ids(stub, requester)) == {plain.id}  # not their own request (SI-4)
    assert set(await _ids(stub, AUDITOR)) == {plain.id, finance.id, own.id}


async def test_approvers_see_the_redacted_input_and_its_hash(
    stub: Any, store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock, value={"order": "o-9", "card": "4111"}))
    reply = await stub.ListApprovals(admin_pb2.ListApprovalsRequest(), metadata=_as(BOB))
    (shown,) = reply.approvals
    assert orjson.loads(shown.input_json) == {"order": "o-9", "card": "****"}
    assert shown.input_hash == record.input_hash
    assert shown.status == types_pb2.APPROVAL_STATUS_PENDING
    assert shown.requester.id == "alice"


async def test_filters_and_pages_over_grpc(
    stub: Any, store: RedisApprovalStore, clock: FakeClock
) -> None:
    made = [await store.create(new_record(clock)) for _ in range(3)]
    await store.decide(made[0].id, approve=False, approver=BOB, via=None, note="", input_hash="")
    rejected = await _ids(stub, BOB, statuses=[types_pb2.APPROVAL_STATUS_REJECTED])
    assert rejected == [made[0].id]
    first = await stub.ListApprovals(admin_pb2.ListApprovalsRequest(page_size=1), metadata=_as(BOB))
    second = await stub.ListApprovals(
        admin_pb2.ListApprovalsRequest(page_size=1, page_token=first.next_page_token),
        metadata=_as(BOB),
    )
    assert {first.approvals[0].id, second.approvals[0].id} == {made[1].id, made[2].id}
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListApprovals(
            admin_pb2.ListApprovalsRequest(page_token="garbage"), metadata=_as(BOB)
        )
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_decide_returns_the_decision_and_governed_errors_in_the_response(
    stub: Any, store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))
    stale = await stub.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=record.id, verdict=admin_pb2.VERDICT_APPROVE, input_hash="0" * 64
        ),
        metadata=_as(BOB),
    )
    assert stale.error.code == types_pb2.ERROR_CODE_APPROVAL_INPUT_MISMATCH
    assert stale.error.message == "The approved input does not match."
    assert not stale.HasField("approval")
    ok = await stub.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=record.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="fine",
            input_hash=record.input_hash,
        ),
        metadata=_as(BOB),
    )
    assert not ok.HasField("error")
    assert ok.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
    assert (ok.approval.decided_by.id, ok.approval.decision_note) == ("bob", "fine")
    unauthorized = await stub.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=record.id, verdict=admin_pb2.VERDICT_REJECT, input_hash=""
        ),
        metadata=_as(Actor(id="eve", kind="user", issuer=ISSUER)),
    )
    assert unauthorized.error.code == types_pb2.ERROR_CODE_FORBIDDEN


async def test_an_allow_listed_inbox_decides_for_a_human(
    stub: Any, store: RedisApprovalStore, clock: FakeClock
) -> None:
    record = await store.create(new_record(clock))

    def request(human: Actor) -> admin_pb2.DecideApprovalRequest:
        return admin_pb2.DecideApprovalRequest(
            approval_id=record.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            input_hash=record.input_hash,
            on_behalf_of=actor_to_proto(human),
        )

    # The requester, asserted by the inbox, is still the requester (SI-4).
    selfish = dataclasses.replace(ALICE, roles=("approver",))
    refused = await stub.DecideApproval(request(selfish), metadata=_as(INBOX))
    assert refused.error.code == types_pb2.ERROR_CODE_APPROVAL_SELF_APPROVAL
    # Anyone else asserting a human is refused.
    forged = await stub.DecideApproval(request(BOB), metadata=_as(CAROL))
    assert forged.error.code == types_pb2.ERROR_CODE_FORBIDDEN
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.DecideApproval(request(dataclasses.replace(BOB, issuer="")), metadata=_as(INBOX))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    ok = await stub.DecideApproval(request(BOB), metadata=_as(INBOX))
    assert not ok.HasField("error")
    assert (ok.approval.decided_by.id, ok.approval.decided_via.id) == ("bob", "inbox")


async def test_calls_without_credentials_are_unauthenticated(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListApprovals(admin_pb2.ListApprovalsRequest())
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_watch_streams_visible_events_and_a_trimmed_id_is_out_of_range(
    stub: Any, store: RedisApprovalStore, clock: FakeClock, redis_client: aioredis.Redis
) -> None:
    hidden = await store.create(new_record(clock, roles=("approver", "finance")))
    shown = await store.create(new_record(clock))
    call = stub.WatchApprovals(
        admin_pb2.WatchApprovalsRequest(after_event_id="0"), metadata=_as(BOB)
    )
    event = await asyncio.wait_for(call.read(), 5)
    assert (event.type, event.approval.id) == ("requested", shown.id)
    call.cancel()
    assert hidden.id != shown.id
    for _ in range(3):
        await store.create(new_record(clock))
    first_id = (await redis_client.xrange(store.keys.events, count=1))[0][0].decode()
    await redis_client.xtrim(store.keys.events, maxlen=1, approximate=False)
    gap = stub.WatchApprovals(
        admin_pb2.WatchApprovalsRequest(after_event_id=first_id), metadata=_as(BOB)
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await asyncio.wait_for(gap.read(), 5)
    assert err.value.code() is grpc.StatusCode.OUT_OF_RANGE


async def test_without_a_store_the_service_answers_approval_unavailable() -> None:
    server = grpc.aio.server()
    admin_pb2_grpc.add_ApprovalAdminServicer_to_server(
        ApprovalAdminServicer(None, authenticate=_authenticate, listener=LISTENER), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await admin_pb2_grpc.ApprovalAdminStub(channel).ListApprovals(
                admin_pb2.ListApprovalsRequest(), metadata=_as(BOB)
            )
        assert reply.error.code == types_pb2.ERROR_CODE_APPROVAL_UNAVAILABLE
        assert not reply.error.retryable
    finally:
        await server.stop(None)


# -- the CLI against the same server --------------------------------------------------------


async def _cli(address: str, actor: Actor, *argv: str) -> int:
    args: Sequence[str] = ["--admin", address, "--insecure", "--token", _spec(actor), *argv]
    return await asyncio.to_thread(cli, list(args))


async def test_cli_lists_shows_and_approves(
    admin: tuple[str, RedisApprovalStore], clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    address, store = admin
    record = await store.create(new_record(clock, value={"order": "o-7", "card": "4111"}))
    assert await _cli(address, BOB, "list") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "ID",
        "CAPABILITY",
        "STATUS",
        "REQUESTER",
        "EXPIRES",
        "APPROVALS",
        "HASH",
    ]
    assert table[1].split()[:4] == [record.id, "orders.refund", "pending", "alice"]
    assert table[1].split()[-2:] == ["0/1", record.input_hash[:12]]
    assert await _cli(address, BOB, "show", record.id) == 0
    details = capsys.readouterr().out
    assert f"input hash:          {record.input_hash}" in details
    assert '"card":"****"' in details
    assert await _cli(address, BOB, "approve", record.id, "--hash", "0" * 64) == 1
    assert "APPROVAL_INPUT_MISMATCH" in capsys.readouterr().err
    assert await _cli(address, BOB, "approve", record.id, "--hash", record.input_hash) == 0
    assert capsys.readouterr().out == f"{record.id}: approved\n"
    assert await _cli(address, BOB, "--format", "json", "list", "--status", "approved") == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert orjson.loads(line)["status"] == "APPROVAL_STATUS_APPROVED"


async def test_cli_reads_the_token_from_the_environment_and_reports_failures(
    admin: tuple[str, RedisApprovalStore],
    clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    address, store = admin
    record = await store.create(new_record(clock))
    monkeypatch.setenv("CAPGATE_TOKEN", _spec(BOB))
    code = await asyncio.to_thread(
        cli, ["--admin", address, "--insecure", "reject", record.id, "--note", "no"]
    )
    assert code == 0
    assert capsys.readouterr().out == f"{record.id}: rejected\n"
    monkeypatch.delenv("CAPGATE_TOKEN")
    code = await asyncio.to_thread(cli, ["--admin", address, "--insecure", "list"])
    assert code == 3
    assert "UNAUTHENTICATED" in capsys.readouterr().err
    assert await _cli(address, BOB, "watch", "--after", "99999999999999-0") == 3
    assert "list approvals, then watch" in capsys.readouterr().err
    assert await _cli(address, BOB, "show", "no-such-id") == 1
    assert await _cli(address, BOB, "frobnicate") == 2
