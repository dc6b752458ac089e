"""The main job: `make demo`. Starts the example upstream, the gateway (with the embedded Redis
when no URL is configured) and runs a scripted client through every kind of outcome: completed,
redacted, denied, concealed, invalid input, timeout, a governance hook's context asking for an
approval (examples/hooks), the approval flow with a self-approval refused, a standing grant
(approve once for similar calls; revoked), an approval with edits (the approver lowers the
amount) and a two-person approval (1 of 2, then 2 of 2), and the same governance over MCP
(Streamable HTTP); then an existing MCP server
(examples/mcp_upstream) governed with a policy and an approval. Exits 0 when every step behaved as
documented. `DEMO_HOLD=1` keeps everything running, leaves a refund waiting for a manager
and prints the addresses, credentials and the commands that approve and resume it.

The gateways' logs go to gateway.log files and the in-process servers' (the example upstream,
the hook, the MCP server, the inbox) to servers.log, all in the run directory the demo names:
its own output stays readable.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import jwt
import orjson
from google.protobuf.duration_pb2 import Duration

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.hooks.reference import serve as serve_hooks
from examples.mcp_upstream.server import serve as serve_desk
from examples.orders.server import State
from examples.orders.server import serve as serve_orders
from gateway.config.settings import JwtAuth, JwtKey
from gateway.inbox.server import start_inbox
from gateway.inbox.settings import AdminConnection, InboxSettings, ServiceToken

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "config" / "gateway.yaml"
ISSUER = "demo-idp"


class Demo:
    def __init__(
        self,
        secret: str,
        ports: dict[str, int],
        socket_path: str,
        redis_url: str = "",
        orders: State | None = None,
    ):
        self.secret = secret
        self.orders = orders  # the example upstream's state: what it really refunded
        self.ports = ports
        self.redis_url = redis_url
        self.socket_path = socket_path
        self.agents = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
        self.admin = grpc.aio.insecure_channel(f"127.0.0.1:{ports['admin']}")
        self.failures: list[str] = []

    def token(
        self, sub: str, roles: list[str], audience: str = "capgate", lifetime: int = 3600
    ) -> str:
        now = int(time.time())
        claims = {
            "sub": sub,
            "kind": "user",
            "roles": roles,
            # orders.mine's map_input reads it (attribute_claims in examples/config).
            "customer": CUSTOMERS.get(sub, ""),
            "iss": ISSUER,
            "aud": audience,
            "iat": now,
            "exp": now + lifetime,
        }
        return jwt.encode(claims, self.secret, algorithm="HS256", headers={"kid": "demo"})

    def md(self, sub: str, roles: list[str], audience: str = "capgate") -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.token(sub, roles, audience)}")]

    def approver(self, who: tuple[str, list[str]]) -> list[tuple[str, str]]:
        """Metadata for the admin listener (ApprovalAdmin), as `who`."""
        return self.md(*who, audience="capgate-admin")

    async def resume(self, approval_id: str) -> gateway_pb2.ExecutionResult:
        """alice resumes one of her approvals."""
        stub = gateway_pb2_grpc.CapabilityGatewayStub(self.agents)
        return await stub.Resume(
            gateway_pb2.ResumeRequest(approval_id=approval_id),
            metadata=self.md(*ALICE),
            timeout=10,
        )

    def check(self, title: str, ok: bool, detail: str = "") -> None:
        """One checked step that is not an envelope: [ok] or [BAD], counted as a failure."""
        print(
            f"  [{'ok ' if ok else 'BAD'}] {title}" + (f"\n        -> {detail}" if detail else "")
        )
        if not ok:
            self.failures.append(title)

    async def invoke(
        self,
        who: tuple[str, list[str]],
        cap: str,
        value: Any = None,
        raw: bytes | None = None,
        **kw: Any,
    ) -> gateway_pb2.ExecutionResult:
        stub = gateway_pb2_grpc.CapabilityGatewayStub(self.agents)
        body = raw if raw is not None else orjson.dumps(value or {})
        return await stub.Invoke(
            gateway_pb2.InvokeRequest(capability_id=cap, input_json=body, **kw),
            metadata=self.md(*who),
            timeout=10,
        )

    def expect(
        self, title: str, result: gateway_pb2.ExecutionResult, outcome: str, code: str | None = None
    ) -> None:
        got = result.WhichOneof("outcome")
        err = result.failed if got == "failed" else result.cancelled
        got_code = (
            types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")
            if got in ("failed", "cancelled")
            else None
        )
        ok = got == outcome and (code is None or got_code == code)
        mark = "ok " if ok else "BAD"
        detail = ""
        if got == "completed":
            detail = result.completed.output_json
        elif got == "approval_required":
            a = result.approval_required.approval
            detail = f"approval {a.id[:8]}… reasons={list(a.reasons)}"
        elif got_code:
            detail = f"{got_code}: {err.message}" + (
                f" issues={[(i.path, i.message) for i in err.issues]}" if err.issues else ""
            )
        print(f"  [{mark}] {title}\n        -> {got}: {detail[:160]}")
        if not ok:
            self.failures.append(title)


# Refunds and cancellations are for support staff (support-staff-only, which orders.refund and
# orders.cancel list in examples/config/gateway.yaml); dave is an agent without that role.
# Refunds over 5,000 need two approvers, one of them from finance (erin): refund-limits in
# examples/policies/20-refunds.yaml.
ALICE = ("alice", ["agent", "support"])
BOB = ("bob", ["manager", "approver"])
CAROL = ("carol", ["manager", "approver", "agent", "support"])
DAVE = ("dave", ["agent"])
ERIN = ("erin", ["manager", "finance", "approver"])
CUSTOMERS = {"alice": "c-1", "dave": "c-2"}

# The refund DEMO_HOLD leaves waiting for a manager: over the 500 approval threshold, and within
# what o-1001 (2,500.00) has left after the script's refunds on it of 25, 750, 510 (approved)
# and 520 (a standing grant), 695.00, so approving and resuming it completes (94.00 left). The
# two chairs on that order cost 601.00. The script's edited and two-person refunds are on
# o-1003, whose total is 2^53 + 1 cents.
HELD_REFUND = {"order_id": "o-1001", "amount": 601, "reason": "both chairs arrived broken"}


def refunded(demo: Demo, order_id: str) -> int:
    """What the example upstream has refunded on an order so far, in cents."""
    assert demo.orders is not None
    return int(demo.orders.book.orders[order_id].refunded_cents)


def error_code(error: types_pb2.CapabilityError) -> str:
    return types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")


async def grant_script(demo: Demo) -> None:
    """A standing grant (docs/approvals.md, Grants): bob approves one refund of alice's and
    grants her similar ones for an hour; the next one runs at once, with the grant's id; one
    outside the grant, or over its total, still asks; once revoked, it asks again."""
    print("\nA standing grant (approve once for similar calls):")
    admin = admin_pb2_grpc.ApprovalAdminStub(demo.admin)
    refund = {"order_id": "o-1001", "amount": 510, "reason": "desk scratched"}
    asked = await demo.invoke(ALICE, "orders.refund", refund)
    demo.expect(
        "alice asks for a refund of 510: a manager must approve", asked, "approval_required"
    )
    approval = asked.approval_required.approval
    decided = await admin.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="ok; and the like for an hour",
            input_hash=approval.input_hash,
        ),
        metadata=demo.approver(BOB),
    )
    created = await admin.CreateGrant(
        admin_pb2.CreateGrantRequest(
            from_approval_id=approval.id,  # whom and what: alice, orders.refund
            constraint="input.amount <= 600",
            amount="input.amount",
            max_total=1000,
            expires_in=Duration(seconds=3600),
            note="alice's refunds up to 600 each, 1,000 in total, for an hour",
        ),
        metadata=demo.approver(BOB),
    )
    grant = created.grant
    demo.check(
        "bob approves it and grants alice's refunds up to 600 each, 1,000 in total, for 1 hour",
        not decided.HasField("error") and not created.HasField("error") and bool(grant.id),
        f"grant {grant.id}: {grant.actor.id}, {grant.capability_id}, "
        f"constraint {grant.constraint!r}, amount {grant.amount!r}, max_total {grant.max_total:g}"
        if grant.id
        else f"{error_code(decided.error)} {error_code(created.error)}: {created.error.message}",
    )
    demo.expect(
        "alice resumes the approved one: it runs", await demo.resume(approval.id), "completed"
    )
    covered = await demo.invoke(ALICE, "orders.refund", {**refund, "amount": 520})
    demo.expect(
        "her next refund of 520 completes at once: the grant stood in", covered, "completed"
    )
    demo.check(
        "... and its envelope names the grant",
        bool(grant.id) and covered.grant_id == grant.id and not covered.approval_id,
        f"grant_id {covered.grant_id or '(none)'}",
    )
    demo.expect(
        "a refund of 700, outside the grant's constraint, still asks a manager",
        await demo.invoke(ALICE, "orders.refund", {**refund, "amount": 700}),
        "approval_required",
    )
    demo.expect(
        "a refund of 590 would take the grant past its total of 1,000 (520 used): it asks too",
        await demo.invoke(ALICE, "orders.refund", {**refund, "amount": 590}),
        "approval_required",
    )
    shown = await admin.GetGrant(
        admin_pb2.GetGrantRequest(grant_id=grant.id), metadata=demo.approver(BOB)
    )
    revoked = await admin.RevokeGrant(
        admin_pb2.RevokeGrantRequest(grant_id=grant.id, note="enough for today"),
        metadata=demo.approver(BOB),
    )
    status = types_pb2.GrantStatus.Name(revoked.grant.status).removeprefix("GRANT_STATUS_")
    demo.check(
        "bob revokes the grant after 1 use",
        shown.grant.uses == 1 and status == "REVOKED",
        f"uses {shown.grant.uses}, total {shown.grant.total:g} of {shown.grant.max_total:g}; "
        f"now {status}",
    )
    demo.expect(
        "the same refund of 520 asks a manager again",
        await demo.invoke(ALICE, "orders.refund", {**refund, "amount": 520}),
        "approval_required",
    )


async def edit_script(demo: Demo) -> None:
    """Approve with edits (docs/approvals.md, Edits; orders.refund says `approval.editable`):
    bob approves a lower amount than alice asked for, and her Resume runs his."""
    print("\nApprove with edits (bob approves a lower amount):")
    admin = admin_pb2_grpc.ApprovalAdminStub(demo.admin)
    before = refunded(demo, "o-1003")
    asked = await demo.invoke(
        ALICE, "orders.refund", {"order_id": "o-1003", "amount": 300, "reason": "late delivery"}
    )
    demo.expect(
        "alice asks for 300 to the customer in arrears: a manager must approve",
        asked,
        "approval_required",
    )
    approval = asked.approval_required.approval
    edited = {"order_id": "o-1003", "amount": 120, "reason": "late delivery"}
    decided = await admin.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="120, what the late delivery cost them",
            input_hash=approval.input_hash,
            edited_input_json=orjson.dumps(edited),
        ),
        metadata=demo.approver(BOB),
    )
    status = types_pb2.ApprovalStatus.Name(decided.approval.status)
    demo.check(
        "bob approves it edited to 120 (governed as alice's own call first)",
        status == "APPROVAL_STATUS_APPROVED" and decided.approval.edited,
        f"{status}, edited={decided.approval.edited}"
        if not decided.HasField("error")
        else f"{error_code(decided.error)}: {decided.error.message}",
    )
    resumed = await demo.resume(approval.id)
    demo.expect("alice resumes: the edited refund runs", resumed, "completed")
    ran = orjson.loads(resumed.completed.output_json or b"{}").get("amount")
    demo.check(
        "... the envelope says edited, with the patch; the upstream refunded 120, not 300",
        resumed.edited
        and bool(resumed.patch_json)
        and ran == 120
        and refunded(demo, "o-1003") - before == 12_000,
        f"edited={resumed.edited} patch={resumed.patch_json} amount={ran}",
    )


async def quorum_script(demo: Demo) -> None:
    """Two-person approval (docs/approvals.md): refunds over 5,000 need two distinct approvers,
    one of them from finance; the first approval leaves it pending, the second approves it,
    and the refund runs once."""
    print("\nTwo-person approval (refunds over 5,000: a manager and finance):")
    admin = admin_pb2_grpc.ApprovalAdminStub(demo.admin)
    before = refunded(demo, "o-1003")
    asked = await demo.invoke(
        ALICE,
        "orders.refund",
        {"order_id": "o-1003", "amount": 6000, "reason": "bulk order returned"},
    )
    demo.expect(
        "alice asks for a refund of 6,000: two approvers must sign", asked, "approval_required"
    )
    approval = asked.approval_required.approval

    async def approve(who: tuple[str, list[str]]) -> admin_pb2.DecideApprovalResponse:
        return await admin.DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval.id,
                verdict=admin_pb2.VERDICT_APPROVE,
                note=f"{who[0]} agrees",
                input_hash=approval.input_hash,
            ),
            metadata=demo.approver(who),
        )

    def progress(decided: admin_pb2.DecideApprovalResponse) -> str:
        if decided.HasField("error"):
            return f"{error_code(decided.error)}: {decided.error.message}"
        a = decided.approval
        status = types_pb2.ApprovalStatus.Name(a.status).removeprefix("APPROVAL_STATUS_")
        return f"{status}, {a.approvals_received} of {a.quorum}"

    first = await approve(BOB)
    demo.check(
        "bob (manager) approves: still pending, 1 of 2",
        first.approval.status == types_pb2.APPROVAL_STATUS_PENDING
        and (first.approval.approvals_received, first.approval.quorum) == (1, 2),
        progress(first),
    )
    demo.expect(
        "alice cannot run it yet",
        await demo.resume(approval.id),
        "failed",
        "APPROVAL_PENDING",
    )
    again = await approve(BOB)
    demo.check(
        "bob approving again counts once",
        again.approval.status == types_pb2.APPROVAL_STATUS_PENDING
        and again.approval.approvals_received == 1,
        progress(again),
    )
    other = await approve(CAROL)
    demo.check(
        "carol (a manager, not finance) cannot be the second: one of the two must be finance",
        error_code(other.error) == "FORBIDDEN",
        progress(other),
    )
    second = await approve(ERIN)
    demo.check(
        "erin (manager, finance) approves: approved, 2 of 2",
        second.approval.status == types_pb2.APPROVAL_STATUS_APPROVED
        and second.approval.approvals_received == 2,
        progress(second),
    )
    resumed = await demo.resume(approval.id)
    demo.expect("alice resumes: the refund of 6,000 runs", resumed, "completed")
    repeated = await demo.resume(approval.id)
    demo.check(
        "... once: a repeated Resume returns the stored envelope, the upstream refunded 6,000",
        repeated.execution_id == resumed.execution_id
        and refunded(demo, "o-1003") - before == 600_000,
        f"refunded {(refunded(demo, 'o-1003') - before) / 100:,.2f} on o-1003",
    )


async def cached_read(demo: Demo) -> None:
    """orders.mine twice: the customer comes from alice's token (map_input), the second read
    from the result cache, after every policy ran again (docs/cache.md)."""
    timings = []
    results = []
    for _ in range(2):
        began = time.perf_counter()
        results.append(await demo.invoke(ALICE, "orders.mine", {"page_size": 5}))
        timings.append((time.perf_counter() - began) * 1000)
    first, second = results
    demo.expect("orders.mine lists alice's orders (customer from her token)", first, "completed")
    same = first.completed.output_json == second.completed.output_json
    ok = same and first.attempts == 1 and second.attempts == 0
    print(
        f"  [{'ok ' if ok else 'BAD'}] the same read again is served from the cache "
        f"(attempts {second.attempts})\n        -> first {timings[0]:.1f} ms (upstream), "
        f"second {timings[1]:.1f} ms (cache hit; policies and redaction ran again)"
    )
    if not ok:
        demo.failures.append("cached read")


async def script(demo: Demo) -> None:
    stub = gateway_pb2_grpc.CapabilityGatewayStub(demo.agents)
    described = await stub.Describe(gateway_pb2.DescribeRequest(), metadata=demo.md(*ALICE))
    print(f"\nDescribe (agent surface, alice): {[c.id for c in described.capabilities]}")
    print("\nInvocations:")
    demo.expect(
        "orders.get completes",
        await demo.invoke(ALICE, "orders.get", {"order_id": "o-1001"}),
        "completed",
    )
    await cached_read(demo)
    demo.expect(
        "a small refund completes, card and email redacted",
        await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": 25}),
        "completed",
    )
    demo.expect(
        "a refund by someone without the support role is denied by policy",
        await demo.invoke(DAVE, "orders.refund", {"order_id": "o-1001", "amount": 25}),
        "failed",
        "POLICY_DENIED",
    )
    demo.expect(
        "a huge refund is denied by policy",
        await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": 50000}),
        "failed",
        "POLICY_DENIED",
    )
    hidden = await demo.invoke(ALICE, "admin.orders.purge", {})
    unknown = await demo.invoke(ALICE, "admin.orders.nonexistent", {})
    demo.expect(
        "an admin capability is concealed from a non-admin",
        hidden,
        "failed",
        "CAPABILITY_NOT_FOUND",
    )
    demo.expect("... exactly like an unknown one", unknown, "failed", "CAPABILITY_NOT_FOUND")
    demo.expect(
        "invalid input names the path, never the value",
        await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": "lots"}),
        "failed",
        "INPUT_INVALID",
    )
    demo.expect(
        "a slow upstream times out (effect unknown)",
        await demo.invoke(ALICE, "orders.cancel", {"order_id": "slow-5000", "reason": "demo"}),
        "cancelled",
        "TIMEOUT",
    )

    demo.expect(
        "a refund to a customer in arrears asks a manager (the standing hook's context)",
        arrears := await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1003", "amount": 30}),
        "approval_required",
    )
    reasons = list(arrears.approval_required.approval.reasons)
    ok = reasons == ["Refund to a customer in arrears."]
    print(f"  [{'ok ' if ok else 'BAD'}] ... for the hook's reason\n        -> {reasons}")
    if not ok:
        demo.failures.append("standing hook reason")

    print("\nApproval flow:")
    admin = admin_pb2_grpc.ApprovalAdminStub(demo.admin)
    pending = await demo.invoke(
        ALICE, "orders.refund", {"order_id": "o-1001", "amount": 750, "reason": "damaged"}
    )
    demo.expect("a refund over 500 needs a manager's approval", pending, "approval_required")
    approval = pending.approval_required.approval
    carols = await demo.invoke(CAROL, "orders.refund", {"order_id": "o-1003", "amount": 900})
    self_try = await admin.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=carols.approval_required.approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            input_hash=carols.approval_required.approval.input_hash,
        ),
        metadata=demo.md(*CAROL, audience="capgate-admin"),
    )
    code = types_pb2.ErrorCode.Name(self_try.error.code).removeprefix("ERROR_CODE_")
    print(
        f"  [{'ok ' if code == 'APPROVAL_SELF_APPROVAL' else 'BAD'}] "
        f"carol cannot approve her own request\n        -> {code}"
    )
    if code != "APPROVAL_SELF_APPROVAL":
        demo.failures.append("self-approval refused")
    listed = await admin.ListApprovals(
        admin_pb2.ListApprovalsRequest(), metadata=demo.md(*BOB, audience="capgate-admin")
    )
    seen = next(a for a in listed.approvals if a.id == approval.id)
    print(
        f"  bob's inbox shows {len(listed.approvals)} pending; "
        f"this one's input as he sees it: {seen.input_json}"
    )
    decided = await admin.DecideApproval(
        admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=admin_pb2.VERDICT_APPROVE,
            note="ok, damaged item",
            input_hash=seen.input_hash,
        ),
        metadata=demo.md(*BOB, audience="capgate-admin"),
    )
    status = types_pb2.ApprovalStatus.Name(decided.approval.status)
    print(
        f"  [{'ok ' if status == 'APPROVAL_STATUS_APPROVED' else 'BAD'}] bob approves -> {status}"
    )
    resumed = await stub.Resume(
        gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=demo.md(*ALICE)
    )
    demo.expect("alice resumes: the refund runs once", resumed, "completed")
    again = await stub.Resume(
        gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=demo.md(*ALICE)
    )
    same = again.execution_id == resumed.execution_id
    print(
        f"  [{'ok ' if same else 'BAD'}] "
        "a repeated Resume returns the stored envelope (same execution id)"
    )
    if not same:
        demo.failures.append("repeated resume")
    await grant_script(demo)
    await edit_script(demo)
    await quorum_script(demo)


def mcp_post(
    url: str,
    token: str,
    body: dict[str, Any],
    session: str | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """One JSON-RPC message to the MCP listener, as any MCP client sends it."""
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **(extra or {}),
    }
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    request = urllib.request.Request(url, data=orjson.dumps(body), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read()), response.headers.get("mcp-session-id")


async def mcp_script(demo: Demo, url: str) -> None:
    token = demo.token(*ALICE, audience=url)

    async def rpc(
        method: str, params: dict[str, Any], session: str | None = None
    ) -> tuple[dict[str, Any], str | None]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return await asyncio.to_thread(mcp_post, url, token, body, session)

    client = {"name": "capgate-demo", "version": "1"}
    init, session = await rpc(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    )
    listed, _ = await rpc("tools/list", {}, session)
    names = [t["name"] for t in listed["result"]["tools"]]
    print(f"\nMCP ({url}, protocol {init['result']['protocolVersion']}), alice's tools: {names}")
    got, _ = await rpc(
        "tools/call", {"name": "orders_get", "arguments": {"order_id": "o-1001"}}, session
    )
    hidden, _ = await rpc("tools/call", {"name": "admin_orders_purge", "arguments": {}}, session)
    unknown, _ = await rpc("tools/call", {"name": "no_such_tool", "arguments": {}}, session)
    # The stateless 2026-07-28 revision: no session, the version and capabilities in _meta.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    stateless, opened = await asyncio.to_thread(
        mcp_post,
        url,
        token,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
        None,
        {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    )
    modern = [t["name"] for t in stateless.get("result", {}).get("tools", [])]
    checks = [
        (
            "the stateless 2026-07-28 revision lists the same tools, without a session",
            modern == names and opened is None,
        ),
        (
            "tools/call orders_get completes (structuredContent)",
            got.get("result", {}).get("isError") is False and "structuredContent" in got["result"],
        ),
        (
            "a hidden tool answers exactly like an unknown one (-32602)",
            hidden.get("error") == unknown.get("error") and hidden["error"]["code"] == -32602,
        ),
    ]
    for title, ok in checks:
        print(f"  [{'ok ' if ok else 'BAD'}] {title}")
        if not ok:
            demo.failures.append(title)


DESK_CONFIG = ROOT / "examples" / "mcp_upstream" / "gateway.yaml"


async def desk_script(secret: str, run_dir: Path) -> list[str]:
    """capgate in front of an existing MCP server (examples/mcp_upstream, the official MCP SDK):
    a second gateway whose capabilities are the server's tools, with a policy on a tool's
    argument and an approval resumed into exactly one tool call. Returns the failed steps."""
    desk = await serve_desk()
    desk_dir = run_dir / "desk"
    desk_dir.mkdir()
    ready = desk_dir / "ready.json"
    env = {
        **os.environ,
        "CAPGATE_DEMO_JWT_SECRET": secret,
        "CAPGATE_RUN_DIR": str(desk_dir),
        "CAPGATE_DESK_ADDR": desk.address,
    }
    log = open(desk_dir / "gateway.log", "wb")  # noqa: SIM115
    command = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(DESK_CONFIG)]
    gateway = subprocess.Popen(
        [*command, "--ready-file", str(ready)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if gateway.poll() is not None or time.monotonic() > deadline:
                print((desk_dir / "gateway.log").read_text()[-4000:], file=sys.stderr)
                return ["the MCP-upstream gateway did not start"]
            await asyncio.sleep(0.1)
        ports = json.loads(ready.read_text())["ports"]
        print(
            f"\nAn existing MCP server governed (kind: mcp): the support desk at "
            f"http://{desk.address}/mcp behind capgate 127.0.0.1:{ports['agents']}"
        )
        demo = Demo(secret, ports, "")
        found = await demo.invoke(ALICE, "desk.search", {"query": "printer"})
        demo.expect("desk.search (tool search_tickets) completes, email masked", found, "completed")
        demo.expect(
            "a policy on the tool's argument: limit 50 is denied before the server sees it",
            await demo.invoke(ALICE, "desk.search", {"query": "a", "limit": 50}),
            "failed",
            "POLICY_DENIED",
        )
        asked = await demo.invoke(ALICE, "desk.close", {"ticket_id": "T-1", "reason": "fixed"})
        demo.expect("desk.close (tool close_ticket) needs an approval", asked, "approval_required")
        if asked.WhichOneof("outcome") == "approval_required":
            approval = asked.approval_required.approval
            decided = await admin_pb2_grpc.ApprovalAdminStub(demo.admin).DecideApproval(
                admin_pb2.DecideApprovalRequest(
                    approval_id=approval.id,
                    verdict=admin_pb2.VERDICT_APPROVE,
                    note="ticket is fixed",
                    input_hash=approval.input_hash,
                ),
                metadata=demo.md(*BOB, audience="capgate-admin"),
            )
            print(f"  bob approves: {'error' if decided.HasField('error') else 'approved'}")
            stub = gateway_pb2_grpc.CapabilityGatewayStub(demo.agents)
            for attempt in ("resumed into the tool call", "resumed again: the stored result"):
                demo.expect(
                    f"desk.close {attempt}",
                    await stub.Resume(
                        gateway_pb2.ResumeRequest(approval_id=approval.id),
                        metadata=demo.md(*ALICE),
                        timeout=10,
                    ),
                    "completed",
                )
        once = desk.calls["close_ticket"] == 1 and desk.calls["search_tickets"] == 1
        print(
            f"  [{'ok ' if once else 'BAD'}] the MCP server ran close_ticket "
            f"{desk.calls['close_ticket']} time(s) and search_tickets "
            f"{desk.calls['search_tickets']} time(s)"
        )
        if not once:
            demo.failures.append("desk call counts")
        await demo.agents.close()
        await demo.admin.close()
        return demo.failures
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(15)
        except subprocess.TimeoutExpired:
            gateway.kill()
        await desk.stop()
        log.close()


async def hold_inbox(demo: Demo) -> Any:
    """DEMO_HOLD=1: serve the approver inbox (as the allow-listed capgate-inbox identity) and
    leave one refund waiting in it for a manager."""
    settings = InboxSettings(
        admin=AdminConnection(
            address=f"127.0.0.1:{demo.ports['admin']}",
            token=ServiceToken(
                issuer=ISSUER,
                subject="capgate-inbox",
                audience="capgate-admin",
                kid="demo",
                secret=demo.secret,
            ),
        ),
        jwt=JwtAuth(
            keys=(JwtKey(kid="demo", alg="HS256", secret=demo.secret),),
            issuers=(ISSUER,),
            audience="capgate-inbox",
            max_lifetime_s=12 * 3600,
        ),
        listen=os.environ.get("DEMO_INBOX_LISTEN", "127.0.0.1:8080"),
    )
    try:
        running = await start_inbox(settings)
    except (OSError, SystemExit):  # the port is taken: any free one will do
        running = await start_inbox(replace(settings, listen="127.0.0.1:0"))
    waiting = await demo.invoke(ALICE, "orders.refund", HELD_REFUND)
    approval = waiting.approval_required.approval
    print(f"\n  approver inbox: {running.url}/  (sign in with bob's token below)")
    print(
        f"  inbox sign-in token (bob, manager): "
        f"{demo.token('bob', ['manager', 'approver'], 'capgate-inbox', 3600)}"
    )
    print(f"  waiting for a decision there: {running.url}/approvals/{approval.id}")
    print_cli(demo, approval.id, approval.input_hash)
    print_resume(demo, approval.id)
    return running


def capgate_command() -> str:
    """How to run `capgate` from here: the venv's script when there is one, else the module."""
    script = Path(sys.executable).parent / "capgate"
    if not script.exists():
        return f"{sys.executable} -m gateway.cli.main"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def print_cli(demo: Demo, approval_id: str, input_hash: str) -> None:
    """Ready-to-run `capgate` commands against this demo (DEMO_HOLD=1), credentials included."""
    capgate = capgate_command()
    admin = f"127.0.0.1:{demo.ports['admin']}"
    bob = demo.token("bob", ["manager", "approver"], "capgate-admin", 3600)
    print(
        "\n  The same approval from the command line (bob, manager; plaintext on loopback; "
        "CAPGATE_TOKEN is whom the shell acts as):"
    )
    print(f"    export CAPGATE_ADMIN={admin} CAPGATE_TOKEN={bob}")
    print(f"    {capgate} approvals list --insecure")
    print(f"    {capgate} approvals show {approval_id} --insecure")
    print(f"    {capgate} approvals approve {approval_id} --hash {input_hash[:12]} --insecure")
    print(f"    {capgate} approvals watch --insecure")
    if demo.redis_url:
        print("  The audit stream (the embedded Redis; events carry no payloads):")
        print(f"    {capgate} audit query --redis-url {demo.redis_url} --since 1h")
        print(f"    {capgate} audit tail --redis-url {demo.redis_url} --capability orders.refund")


def print_resume(demo: Demo, approval_id: str) -> None:
    """The requester's side once the refund is approved: alice resumes it with `capgate resume`
    (CAPGATE_TOKEN is whom the shell acts as: bob above, alice here), and the refund runs once."""
    capgate = capgate_command()
    agents = f"127.0.0.1:{demo.ports['agents']}"
    # The caller commands' default address is the demo's agents listener (127.0.0.1:7443).
    address = "" if agents == "127.0.0.1:7443" else f" --address {agents}"
    print("\n  Once it is approved, alice resumes it and the refund runs (once, however often):")
    print(f"    export CAPGATE_TOKEN={demo.token(*ALICE, lifetime=3600)}")
    print(f"    {capgate} resume {approval_id}{address} --insecure")


def log_servers_to(path: Path) -> None:
    """Send the in-process servers' logs (the example upstream, the hook, the MCP server, the
    inbox) and Python warnings to a file, so that the demo's output is only its own. A root
    handler set first also keeps the MCP SDK from adding its console handler (it configures
    logging with basicConfig, which does nothing once the root logger has a handler)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)


async def main() -> int:
    hold = os.environ.get("DEMO_HOLD") == "1"
    # Line by line even into a pipe: the held demo's commands must show up while it waits.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    run_dir = Path(tempfile.mkdtemp(prefix="capgate-demo-"))
    log_servers_to(run_dir / "servers.log")
    secret = os.environ.get("CAPGATE_DEMO_JWT_SECRET") or secrets.token_urlsafe(32)
    book = State()  # the demo checks what the upstream really refunded
    orders, orders_port = await serve_orders("127.0.0.1:0", state=book)
    hooks, _ = await serve_hooks(f"unix://{run_dir}/hooks.sock")  # the standing hook
    env = {
        **os.environ,
        "CAPGATE_DEMO_JWT_SECRET": secret,
        "CAPGATE_RUN_DIR": str(run_dir),
        "CAPGATE_ORDERS_ADDR": f"127.0.0.1:{orders_port}",
        "CAPGATE_DATA_DIR": str(run_dir / "data"),
        "CAPGATE_AUDIT_HMAC_KEY": secrets.token_urlsafe(24),
    }
    ready = run_dir / "ready.json"
    log = open(run_dir / "gateway.log", "wb")  # noqa: SIM115
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "serve",
            "--config",
            str(CONFIG),
            "--ready-file",
            str(ready),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if gateway.poll() is not None or time.monotonic() > deadline:
                print((run_dir / "gateway.log").read_text()[-4000:], file=sys.stderr)
                print("capgate did not start", file=sys.stderr)
                return 1
            await asyncio.sleep(0.1)
        ready_info = json.loads(ready.read_text())
        ports = ready_info["ports"]
        print(
            f"capgate is up: agents 127.0.0.1:{ports['agents']}, admin 127.0.0.1:{ports['admin']}, "
            f"mcp http://127.0.0.1:{ports['mcp']}/mcp, "
            f"local unix:{run_dir}/capgate.sock; upstream orders 127.0.0.1:{orders_port}"
        )
        print(
            f"logs: {run_dir}/gateway.log (the gateway and its audit trail), "
            f"{run_dir}/servers.log (the example upstream, the hook, the MCP server, the inbox)"
        )
        demo = Demo(secret, ports, f"{run_dir}/capgate.sock", ready_info.get("redis_url", ""), book)
        await script(demo)
        mcp_url = f"http://127.0.0.1:{ports['mcp']}/mcp"
        await mcp_script(demo, mcp_url)
        demo.failures += await desk_script(secret, run_dir)
        print(f"\nAudit trail (JSON lines, no payloads): {run_dir / 'gateway.log'}")
        print(f"The MCP-upstream gateway's log and audit trail: {run_dir / 'desk' / 'gateway.log'}")
        if demo.failures:
            print(f"\nDEMO FAILED: {demo.failures}", file=sys.stderr)
            return 1
        print("\nAll demo steps behaved as documented.")
        if hold:
            print("\nDEMO_HOLD=1: everything keeps running. Try it by hand (Ctrl-C to stop):")
            print(
                f"  gateway (agents): 127.0.0.1:{ports['agents']}   "
                f"admin: 127.0.0.1:{ports['admin']}"
            )
            print(f"  MCP (Streamable HTTP): {mcp_url}")
            print(
                f"  MCP credential (alice, Authorization: Bearer): "
                f"{demo.token(*ALICE, mcp_url, 3600)}"
            )
            print(f"  caller credential (alice): {demo.token(*ALICE, lifetime=3600)}")
            print(
                "  approver credential (bob, admin listener): "
                f"{demo.token('bob', ['manager', 'approver'], 'capgate-admin', 3600)}"
            )
            print('  for the "Try it" snippets of README.md and docs/mcp.md, in your shell:')
            print(
                f"    export CAPGATE_TOKEN={demo.token(*ALICE, lifetime=3600)} "
                f"MCP_TOKEN={demo.token(*ALICE, mcp_url, 3600)}"
            )
            inbox = await hold_inbox(demo)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            await inbox.stop()
        await demo.agents.close()
        await demo.admin.close()
        return 0
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(15)
        except subprocess.TimeoutExpired:
            gateway.kill()
        await orders.stop(0)
        await hooks.stop(0)
        log.close()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
