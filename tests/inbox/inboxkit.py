"""The inbox test stack: the example upstream, a real gateway (tests/gateway/gateway.yaml with
the inbox allow-listed on its admin listener), a real Redis, and the inbox served by uvicorn on
loopback. Plus a plain HTTP client (http.client in a thread: the server shares the test loop)."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import grpc
import jwt
import orjson

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.config.settings import JwtAuth, JwtKey, RedisSettings, Settings
from gateway.inbox.server import RunningInbox
from gateway.inbox.settings import AdminConnection, InboxSettings, ProxyAuth, ServiceToken
from gateway.model import ApprovalSpec
from gateway.process.serve import Gateway
from tests.gateway.harness import JWT_SECRET, token
from tests.notify.notifykit import settings_for

INBOX_AUDIENCE = "capgate-inbox"
PROXY_SECRET = "proxy-secret-0123456789-0123456789-xyz"
INBOX_ID = ("test-idp", "capgate-inbox")


def gateway_settings(orders_address: str, redis_url: str, **overrides: Any) -> Settings:
    settings = settings_for(
        orders_address,
        redis_url,
        redis=RedisSettings(url=redis_url, key_prefix="capgate-inbox-test"),
        **overrides,
    )
    listeners = tuple(
        dataclasses.replace(lst, on_behalf_of=(INBOX_ID,)) if lst.role == "admin" else lst
        for lst in settings.listeners
    )
    capabilities = tuple(
        dataclasses.replace(cap, approval=APPROVALS[cap.id]) if cap.id in APPROVALS else cap
        for cap in settings.capabilities
    )
    refund = next(cap for cap in capabilities if cap.id == "orders.refund")
    capabilities += (
        dataclasses.replace(
            refund,
            id="orders.bulk_refund",
            description="Refund several orders of one customer at once.",
            input_schema=BULK_REFUND_SCHEMA,
            approval=ApprovalSpec(
                required=True,
                reason="Bulk refunds are reviewed by a manager.",
                roles=("manager",),
                expires_in_s=3600,
            ),
            redact=dataclasses.replace(refund.redact, approval_input=()),
            policies=(),
        ),
    )
    cancel = next(cap for cap in capabilities if cap.id == "orders.cancel")
    capabilities += (
        # Issue 28: approvers may edit the input before approving (no approval redaction, so
        # the form holds the whole input).
        dataclasses.replace(
            refund,
            id=EDITABLE,
            description="Refund an order; approvers may correct the amount.",
            approval=ApprovalSpec(
                required=True,
                reason="Corrected refunds are reviewed by a manager.",
                roles=("manager",),
                expires_in_s=3600,
                editable=True,
            ),
            redact=dataclasses.replace(refund.redact, approval_input=()),
            policies=(),
        ),
        # Two approvers, one of them an admin: "1 of 2 approvals", "still needed: admin".
        dataclasses.replace(
            cancel,
            id=TWO_PERSON,
            description="Cancel an order signed off by a manager and an admin.",
            approval=ApprovalSpec(
                required=True,
                reason="Two people sign off these cancellations.",
                roles=("manager",),
                expires_in_s=3600,
                quorum=2,
                distinct_roles=("manager", "admin"),
            ),
            policies=(),
        ),
    )
    capabilities += (
        # Undecided for a minute, it escalates to admins (who lack the approver role).
        dataclasses.replace(
            cancel,
            id=ESCALATING,
            description="Cancel an order; escalated to an admin when nobody decides.",
            approval=ApprovalSpec(
                required=True,
                reason="Approvers decide these cancellations, admins once escalated.",
                roles=("approver",),
                expires_in_s=3600,
                escalate_after_s=60,
                escalation_roles=("admin",),
            ),
            policies=(),
        ),
    )
    return dataclasses.replace(settings, listeners=listeners, capabilities=capabilities)


EDITABLE = "orders.refund_corrected"
TWO_PERSON = "orders.cancel_signed"
ESCALATING = "orders.cancel_escalating"


# A capability whose input nests (objects in arrays in objects), for the input table.
BULK_REFUND_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["customer", "orders"],
    "properties": {
        "customer": {"type": "string"},
        "reason": {"type": "string"},
        "orders": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "amount": {"type": "number"},
                    "lines": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "notify": {"type": "object"},
    },
}

# More kinds of approval than tests/gateway/gateway.yaml declares (its refunds need approval by
# policy): a destructive, critical purge for admins and a cancellation for managers.
APPROVALS = {
    "admin.orders.purge": ApprovalSpec(
        required=True,
        reason="Purging orders cannot be undone.",
        roles=("admin",),
        expires_in_s=1800,
    ),
    "orders.cancel": ApprovalSpec(
        required=True,
        reason="Cancellations are reviewed by a manager.",
        roles=("manager",),
        expires_in_s=3600,
    ),
}


def inbox_settings(admin_port: int, redis_url: str, **overrides: Any) -> InboxSettings:
    key = JwtKey(kid="hs1", alg="HS256", secret=JWT_SECRET)
    values: dict[str, Any] = {
        "admin": AdminConnection(
            address=f"127.0.0.1:{admin_port}",
            token=ServiceToken(
                issuer="test-idp",
                subject="capgate-inbox",
                audience="capgate-admin",
                kid="hs1",
                secret=JWT_SECRET,
            ),
        ),
        "jwt": JwtAuth(keys=(key,), issuers=("test-idp",), audience=INBOX_AUDIENCE),
        "proxy": ProxyAuth(
            jwt=JwtAuth(
                keys=(JwtKey(kid="p1", alg="HS256", secret=PROXY_SECRET),),
                issuers=("auth-proxy",),
                audience=INBOX_AUDIENCE,
                max_lifetime_s=300,
            )
        ),
        "listen": "127.0.0.1:0",
        "redis": RedisSettings(url=redis_url, key_prefix="capgate-inbox-test"),
        "session_secret": "session-secret-0123456789-0123456789",
    }
    return InboxSettings(**(values | overrides))


def human_token(name: str, *, audience: str = INBOX_AUDIENCE, **overrides: Any) -> str:
    """A bearer JWT for a tests/gateway/harness.py actor, for the inbox's audience."""
    return token(name, audience=audience, **overrides)


def proxy_assertion(sub: str, roles: list[str], *, lifetime: int = 120, **overrides: Any) -> str:
    now = int(time.time())
    claims = {
        "sub": sub,
        "kind": "user",
        "roles": roles,
        "iss": "auth-proxy",
        "aud": INBOX_AUDIENCE,
        "iat": now,
        "exp": now + lifetime,
    } | overrides
    return jwt.encode(claims, PROXY_SECRET, algorithm="HS256", headers={"kid": "p1"})


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str


def _request(url: str, method: str, headers: dict[str, str], body: bytes | None) -> Reply:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        found: dict[str, str] = {}
        for name, value in reply.getheaders():
            key = name.lower()
            found[key] = f"{found[key]}\n{value}" if key in found else value
        return Reply(reply.status, found, reply.read().decode())
    finally:
        conn.close()


def _names(headers: dict[str, str]) -> dict[str, str]:
    return {name.replace("_", "-"): value for name, value in headers.items()}


async def get(url: str, **headers: str) -> Reply:
    """GET `url`; keyword names are header names with '_' for '-'."""
    return await asyncio.to_thread(_request, url, "GET", _names(headers), None)


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def post_form(url: str, form: dict[str, str], **headers: str) -> Reply:
    """POST a form as the inbox's own page would: with the `Origin` of `url` unless `origin`
    is given ("" sends none)."""
    sent = {"content-type": "application/x-www-form-urlencoded", "origin": origin(url)}
    sent |= _names(headers)
    sent = {name: value for name, value in sent.items() if value != ""}
    return await asyncio.to_thread(_request, url, "POST", sent, urlencode(form).encode())


@dataclass
class Stack:
    gw: Gateway
    inbox: RunningInbox
    redis_url: str

    @property
    def url(self) -> str:
        return self.inbox.url

    async def _channel(self, listener: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.gw.ports()[listener]}")

    async def invoke(
        self, capability: str, value: Any, *, actor: str = "alice", **claims: Any
    ) -> gateway_pb2.ExecutionResult:
        async with await self._channel("agents") as channel:
            request = gateway_pb2.InvokeRequest(
                capability_id=capability, input_json=orjson.dumps(value)
            )
            return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
                request,
                metadata=[("authorization", f"Bearer {token(actor, **claims)}")],
                timeout=10,
            )

    async def request(
        self, capability: str, value: Any, *, actor: str = "alice", **claims: Any
    ) -> types_pb2.Approval:
        """Invoke a call that must suspend for approval; its pending approval."""
        result = await self.invoke(capability, value, actor=actor, **claims)
        assert result.WhichOneof("outcome") == "approval_required", result
        return result.approval_required.approval

    async def request_refund(
        self, amount: float = 800, order_id: str = "o-1001", actor: str = "alice", **claims: Any
    ) -> types_pb2.Approval:
        return await self.request(
            "orders.refund", {"order_id": order_id, "amount": amount}, actor=actor, **claims
        )

    async def resume(
        self, approval_id: str, actor: str = "alice", **claims: Any
    ) -> gateway_pb2.ExecutionResult:
        async with await self._channel("agents") as channel:
            return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Resume(
                gateway_pb2.ResumeRequest(approval_id=approval_id),
                metadata=[("authorization", f"Bearer {token(actor, **claims)}")],
                timeout=10,
            )

    async def approval(self, approval_id: str) -> types_pb2.Approval:
        """The approval as ApprovalAdmin has it now (listed by an auditor)."""
        async with await self._channel("admin") as channel:
            stub = admin_pb2_grpc.ApprovalAdminStub(channel)
            md = [("authorization", f"Bearer {token('auditor', audience='capgate-admin')}")]
            statuses = list(types_pb2.ApprovalStatus.values())[1:]
            page = ""
            while True:
                reply = await stub.ListApprovals(
                    admin_pb2.ListApprovalsRequest(
                        statuses=statuses, page_size=500, page_token=page
                    ),
                    metadata=md,
                )
                for found in reply.approvals:
                    if found.id == approval_id:
                        return found
                page = reply.next_page_token
                if not page:
                    raise LookupError(approval_id)

    async def seen_by_inbox(
        self, approval_id: str, status: str = "PENDING", within_s: float = 5.0
    ) -> None:
        """Wait until the inbox's book holds the approval in `status`."""
        want = types_pb2.ApprovalStatus.Value(f"APPROVAL_STATUS_{status}")
        async with asyncio.timeout(within_s):
            while True:
                found = self.inbox.inbox.book.get(approval_id)
                if found is not None and found.status == want:
                    return
                await asyncio.sleep(0.02)
