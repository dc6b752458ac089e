"""mTLS authentication over a real grpc.aio server on loopback, with certificates made here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from authkit import Issued, cert_pem, issue, make_ca, private_pem

from gateway.config.settings import Listener, MtlsAuth, TlsSettings
from gateway.transport.auth.base import AuthenticationFailed
from gateway.transport.auth.listeners import build_authenticator, server_credentials
from gateway.transport.auth.mtls import MtlsAuthenticator

SPIFFE_ID = "spiffe://example.org/ns/shop/sa/agent"
METHOD = "/capgate.test.Echo/WhoAmI"

pytestmark = pytest.mark.integration


@dataclass
class Pki:
    ca: Issued
    spiffe_client: Issued
    dns_client: Issued
    stranger: Issued  # from another CA


@dataclass
class Served:
    port: int
    pki: Pki


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca = make_ca()
    return Pki(
        ca=ca,
        spiffe_client=issue(ca, "agent", dns=("agent.shop.svc",), uris=(SPIFFE_ID,)),
        dns_client=issue(ca, "billing", dns=("billing.shop.svc", "billing")),
        stranger=issue(make_ca("other CA"), "intruder", uris=(SPIFFE_ID,)),
    )


@pytest.fixture
async def served(pki: Pki, tmp_path: Path) -> AsyncIterator[Served]:
    server_cert, server_key = issue(
        pki.ca, "gateway", dns=("localhost",), ips=("127.0.0.1",)
    ).write(tmp_path, "server")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(cert_pem(pki.ca.cert))
    listener = Listener(
        name="agents",
        address="127.0.0.1:0",
        surface="agent",
        auth="mtls",
        tls=TlsSettings(cert_file=server_cert, key_file=server_key, client_ca_file=str(ca_file)),
        mtls=MtlsAuth(roles={SPIFFE_ID: ("support",)}),
    )
    authenticator = build_authenticator(listener)

    async def who_am_i(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        try:
            actor = authenticator.authenticate(
                context.invocation_metadata() or (), context.auth_context(), context.peer()
            )
        except AuthenticationFailed as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.reason)
        return json.dumps([actor.id, actor.kind, actor.issuer, list(actor.roles)]).encode()

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who_am_i)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("capgate.test.Echo", {"WhoAmI": handler}),)
    )
    credentials = server_credentials(listener)
    assert credentials is not None
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    yield Served(port, pki)
    await server.stop(None)


async def _call(served: Served, client: Issued | None) -> list[object]:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=cert_pem(served.pki.ca.cert),
        private_key=private_pem(client.key) if client else None,
        certificate_chain=cert_pem(client.cert) if client else None,
    )
    async with grpc.aio.secure_channel(f"127.0.0.1:{served.port}", credentials) as channel:
        reply = await channel.unary_unary(METHOD)(b"", timeout=5)
    return list(json.loads(reply))


async def test_actor_is_the_spiffe_id_of_the_client_certificate(served: Served) -> None:
    actor = await _call(served, served.pki.spiffe_client)
    assert actor == [SPIFFE_ID, "service", "mtls", ["support"]]


async def test_without_spiffe_id_the_first_dns_san_is_the_actor(served: Served) -> None:
    assert await _call(served, served.pki.dns_client) == ["billing.shop.svc", "service", "mtls", []]


async def test_client_without_a_certificate_fails_the_handshake(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _call(served, None)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_certificate_from_another_ca_fails_the_handshake(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _call(served, served.pki.stranger)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


def _ssl_context(pem: bytes) -> dict[str, list[bytes]]:
    # Only what grpc provides when its typed peer_uri / peer_dns properties are absent.
    return {"transport_security_type": [b"ssl"], "x509_pem_cert": [pem]}


def test_identity_falls_back_to_parsing_the_pem_certificate(pki: Pki) -> None:
    auth = MtlsAuthenticator(MtlsAuth(kind="agent", issuer="mesh", roles={SPIFFE_ID: ("a",)}))
    actor = auth.authenticate((), _ssl_context(cert_pem(pki.spiffe_client.cert)), "")
    assert (actor.id, actor.kind, actor.issuer, actor.roles) == (SPIFFE_ID, "agent", "mesh", ("a",))
    assert auth.identity(_ssl_context(cert_pem(pki.dns_client.cert))) == "billing.shop.svc"


def test_untyped_san_list_and_common_name_are_never_used(pki: Pki) -> None:
    auth = MtlsAuthenticator()
    no_sans = issue(pki.ca, "spiffe://example.org/cn-is-not-an-identity")
    context = _ssl_context(cert_pem(no_sans.cert))
    context["x509_subject_alternative_name"] = [b"spiffe://example.org/forged"]
    with pytest.raises(AuthenticationFailed, match="no usable identity"):
        auth.authenticate((), context, "")


def test_two_spiffe_ids_are_ambiguous() -> None:
    context = {
        "transport_security_type": [b"ssl"],
        "peer_uri": [b"spiffe://a.org/x", b"spiffe://b.org/y"],
    }
    with pytest.raises(AuthenticationFailed, match="ambiguous"):
        MtlsAuthenticator().authenticate((), context, "")


def test_plaintext_or_certificateless_connection_is_refused() -> None:
    auth = MtlsAuthenticator()
    for context in (
        {},
        {"transport_security_type": [b"insecure"]},
        {"transport_security_type": [b"ssl"]},
    ):
        with pytest.raises(AuthenticationFailed, match="client certificate required"):
            auth.authenticate((), context, "ipv4:127.0.0.1:1")


def test_capgate_metadata_cannot_override_the_certificate(pki: Pki) -> None:
    metadata = [("x-capgate-actor-id", "root"), ("x-capgate-actor-roles", "admin")]
    actor = MtlsAuthenticator().authenticate(
        metadata, _ssl_context(cert_pem(pki.spiffe_client.cert)), ""
    )
    assert (actor.id, actor.roles) == (SPIFFE_ID, ())


def test_kind_must_be_an_authenticated_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        MtlsAuthenticator(MtlsAuth(kind="anonymous"))
