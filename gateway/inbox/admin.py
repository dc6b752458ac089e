"""The inbox's client of ApprovalAdmin, under the inbox's own identity (never the human's).

Credentials: a short-lived JWT the inbox mints for itself (re-minted at half its lifetime) and/or
an mTLS client certificate. The human only ever travels as `on_behalf_of` (DecideApproval,
CreateGrant, RevokeGrant), which the admin listener accepts solely from identities on its
`on_behalf_of` allow-list and records next to the inbox identity.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import jwt

from capgate.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from gateway.inbox.settings import AdminConnection, ServiceToken
from gateway.model import Actor


class TokenMinter:
    """Mints the inbox's own bearer JWT and reuses it for half its lifetime."""

    def __init__(self, token: ServiceToken, *, clock: Callable[[], float] = time.time) -> None:
        if token.alg == "HS256" and len(token.secret.encode()) < 32:
            raise ValueError("admin.token: HS256 needs a secret of at least 32 bytes")
        if token.alg != "HS256" and not token.private_key_pem:
            raise ValueError(f"admin.token: {token.alg} needs private_key_file")
        self._token = token
        self._clock = clock
        self._current = ""
        self._renew_at = 0.0

    def bearer(self) -> str:
        now = self._clock()
        if now >= self._renew_at:
            t = self._token
            claims = {
                "iss": t.issuer,
                "sub": t.subject,
                "aud": t.audience,
                "kind": "service",
                "roles": [],
                "iat": int(now),
                "exp": int(now) + t.lifetime_s,
                "jti": uuid.uuid4().hex,
            }
            key = t.secret if t.alg == "HS256" else t.private_key_pem
            headers = {"kid": t.kid} if t.kid else None
            self._current = jwt.encode(claims, key, algorithm=t.alg, headers=headers)
            self._renew_at = now + t.lifetime_s / 2
        return self._current


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def open_channel(conn: AdminConnection) -> grpc.aio.Channel:
    """Plaintext (loopback or unix socket), TLS, or mTLS when a client certificate is set."""
    if not conn.tls:
        return grpc.aio.insecure_channel(conn.address)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(conn.ca_file),
        private_key=_read(conn.key_file),
        certificate_chain=_read(conn.cert_file),
    )
    options = [("grpc.ssl_target_name_override", conn.server_name)] if conn.server_name else []
    return grpc.aio.secure_channel(conn.address, credentials, options=options)


# A decision for this id finds no approval: an allow-listed inbox is told NOT_FOUND, any other
# identity FORBIDDEN for its on_behalf_of (ApprovalAdmin checks the allow-list first).
PROBE_APPROVAL_ID = "inbox-allow-list-probe"
_PROBE_HUMAN = Actor(id="capgate-inbox-probe", kind="user", issuer="capgate-inbox-probe")


def human_to_proto(actor: Actor) -> types_pb2.Actor:
    return types_pb2.Actor(id=actor.id, issuer=actor.issuer, kind=actor.kind, roles=actor.roles)


class AdminClient:
    """ListApprovals, DecideApproval, WatchApprovals and the grant calls as the inbox
    identity."""

    def __init__(self, conn: AdminConnection, *, clock: Callable[[], float] = time.time) -> None:
        self._conn = conn
        self._minter = TokenMinter(conn.token, clock=clock) if conn.token else None
        self._channel = open_channel(conn)
        self._stub = admin_pb2_grpc.ApprovalAdminStub(self._channel)

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        if self._minter is None:
            return ()
        return (("authorization", f"Bearer {self._minter.bearer()}"),)

    async def list(
        self,
        statuses: Sequence[types_pb2.ApprovalStatus],
        *,
        page_size: int = 500,
        page_token: str = "",
    ) -> admin_pb2.ListApprovalsResponse:
        request = admin_pb2.ListApprovalsRequest(
            statuses=statuses, page_size=page_size, page_token=page_token
        )
        reply: Any = await self._stub.ListApprovals(
            request, metadata=self._metadata(), timeout=self._conn.timeout_s
        )
        return reply  # type: ignore[no-any-return]

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        note: str,
        input_hash: str,
        human: Actor,
        edited_input_json: bytes = b"",
    ) -> admin_pb2.DecideApprovalResponse:
        """`edited_input_json`: approve with edits (the changed input; `input_hash` stays the
        hash of the input the page showed)."""
        request = admin_pb2.DecideApprovalRequest(
            approval_id=approval_id,
            verdict=admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT,
            note=note,
            input_hash=input_hash,
            on_behalf_of=human_to_proto(human),
            edited_input_json=edited_input_json,
        )
        reply: Any = await self._stub.DecideApproval(
            request, metadata=self._metadata(), timeout=self._conn.timeout_s
        )
        return reply  # type: ignore[no-any-return]

    async def create_grant(
        self, request: admin_pb2.CreateGrantRequest, *, human: Actor
    ) -> admin_pb2.GrantResponse:
        """CreateGrant for the human (its `on_behalf_of` is set here)."""
        request.on_behalf_of.CopyFrom(human_to_proto(human))
        reply: Any = await self._stub.CreateGrant(
            request, metadata=self._metadata(), timeout=self._conn.timeout_s
        )
        return reply  # type: ignore[no-any-return]

    async def list_grants(
        self,
        statuses: Sequence[types_pb2.GrantStatus],
        *,
        capability_id: str = "",
        actor_id: str = "",
        page_size: int = 200,
        page_token: str = "",
    ) -> admin_pb2.ListGrantsResponse:
        request = admin_pb2.ListGrantsRequest(
            statuses=statuses,
            capability_id=capability_id,
            actor_id=actor_id,
            page_size=page_size,
            page_token=page_token,
        )
        reply: Any = await self._stub.ListGrants(
            request, metadata=self._metadata(), timeout=self._conn.timeout_s
        )
        return reply  # type: ignore[no-any-return]

    async def get_grant(self, grant_id: str) -> admin_pb2.GrantResponse:
        reply: Any = await self._stub.GetGrant(
            admin_pb2.GetGrantRequest(grant_id=grant_id),
            metadata=self._metadata(),
            timeout=self._conn.timeout_s,
        )
        return reply  # type: ignore[no-any-return]

    async def revoke_grant(
        self, grant_id: str, *, note: str, human: Actor
    ) -> admin_pb2.GrantResponse:
        request = admin_pb2.RevokeGrantRequest(
            grant_id=grant_id, note=note, on_behalf_of=human_to_proto(human)
        )
        reply: Any = await self._stub.RevokeGrant(
            request, metadata=self._metadata(), timeout=self._conn.timeout_s
        )
        return reply  # type: ignore[no-any-return]

    def identity(self) -> str:
        """How this inbox is known to the admin listener, for the operator's eyes."""
        token = self._conn.token
        if token is not None:
            return f"{{issuer: {token.issuer}, id: {token.subject}}}"
        return "the identity of its client certificate"

    async def acts_for_humans(self) -> bool:
        """Whether the admin listener takes `on_behalf_of` from this inbox's identity (its
        allow-list), asked with a decision for an approval that does not exist: nothing is
        decided either way. Raises `grpc.aio.AioRpcError` when the gateway cannot be asked."""
        reply = await self.decide(
            PROBE_APPROVAL_ID, approve=False, note="", input_hash="", human=_PROBE_HUMAN
        )
        return not (reply.HasField("error") and reply.error.code == types_pb2.ERROR_CODE_FORBIDDEN)

    def watch(self, after_event_id: str = "") -> Any:
        """The WatchApprovals call, started now (events after this moment, or after the id);
        iterate it with `async for`, cancel it when done."""
        return self._stub.WatchApprovals(
            admin_pb2.WatchApprovalsRequest(after_event_id=after_event_id),
            metadata=self._metadata(),
        )

    async def close(self) -> None:
        await self._channel.close()
