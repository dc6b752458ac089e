"""`trusted-local` and `none` listeners: asserted actors on unix sockets, anonymous callers."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from gateway.config.settings import Listener, TrustedLocalAuth
from gateway.model import ANONYMOUS
from gateway.transport.auth.base import AuthenticationFailed
from gateway.transport.auth.listeners import build_authenticator
from gateway.transport.auth.local import AnonymousAuthenticator, TrustedLocalAuthenticator


def _auth(**kw: object) -> TrustedLocalAuthenticator:
    return TrustedLocalAuthenticator(TrustedLocalAuth(**kw))  # type: ignore[arg-type]


def test_asserted_actor_is_taken_from_capgate_metadata() -> None:
    metadata = [
        ("x-capgate-actor-id", "user-7"),
        ("x-capgate-actor-kind", "agent"),
        ("x-capgate-actor-roles", "support, approver,,"),
    ]
    actor = _auth(issuer="app").authenticate(metadata, {}, "unix:")
    assert (actor.id, actor.kind, actor.issuer, actor.roles) == (
        "user-7",
        "agent",
        "app",
        ("support", "approver"),
    )


def test_kind_defaults_to_user() -> None:
    actor = _auth().authenticate([("x-capgate-actor-id", "u")], {}, "")
    assert (actor.kind, actor.issuer, actor.roles) == ("user", "local", ())


def test_no_actor_is_anonymous_when_allowed_and_refused_otherwise() -> None:
    assert _auth().authenticate([], {}, "") is ANONYMOUS
    assert _auth().authenticate([("x-capgate-actor-kind", "anonymous")], {}, "") is ANONYMOUS
    strict = _auth(allow_anonymous=False)
    for metadata in ([], [("x-capgate-actor-kind", "anonymous")]):
        with pytest.raises(AuthenticationFailed, match="actor required"):
            strict.authenticate(metadata, {}, "")


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ([("x-capgate-actor-roles", "admin")], "actor id required"),
        ([("x-capgate-actor-kind", "service")], "actor id required"),
        ([("x-capgate-actor-id", "u"), ("x-capgate-actor-kind", "root")], "kind not allowed"),
        ([("x-capgate-actor-id", "a"), ("x-capgate-actor-id", "b")], "more than one"),
        ([("x-capgate-actor-id", "u\nforged audit line")], "invalid x-capgate-actor-id"),
        ([("x-capgate-actor-id", "u" * 1025)], "invalid x-capgate-actor-id"),
        ([("x-capgate-actor-id", b"\xff\xfe")], "malformed credentials"),
    ],
)
def test_incomplete_or_suspicious_assertions_are_refused(
    metadata: list[tuple[str, str | bytes]], reason: str
) -> None:
    with pytest.raises(AuthenticationFailed, match=reason):
        _auth().authenticate(metadata, {}, "")


def test_none_mode_makes_every_caller_anonymous() -> None:
    metadata = [("x-capgate-actor-id", "root"), ("authorization", "Bearer whatever")]
    assert AnonymousAuthenticator().authenticate(metadata, {}, "") is ANONYMOUS


@pytest.mark.integration
async def test_asserted_actor_over_a_real_unix_socket(tmp_path: Path) -> None:
    address = f"unix://{tmp_path / 'capgate.sock'}"
    listener = Listener(name="app", address=address, surface="direct", auth="trusted-local")
    authenticator = build_authenticator(listener)

    async def who_am_i(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        actor = authenticator.authenticate(
            context.invocation_metadata() or (), context.auth_context(), context.peer()
        )
        return json.dumps([actor.id, actor.kind, list(actor.roles)]).encode()

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who_am_i)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("capgate.test.Echo", {"WhoAmI": handler}),)
    )
    server.add_insecure_port(address)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_unary("/capgate.test.Echo/WhoAmI")
            metadata = (("x-capgate-actor-id", "svc-a"), ("x-capgate-actor-kind", "service"))
            reply = await call(b"", metadata=metadata, timeout=5)
            assert json.loads(reply) == ["svc-a", "service", []]
            assert json.loads(await call(b"", timeout=5)) == ["anonymous", "anonymous", []]
    finally:
        await server.stop(None)
