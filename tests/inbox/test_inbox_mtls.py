"""The inbox identity as an mTLS client certificate: ApprovalAdmin accepts `on_behalf_of` from
the allow-listed certificate only, and records it as `decided_via`."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from capgate.v1 import types_pb2
from examples.orders.server import serve as serve_orders
from gateway.config.settings import MtlsAuth, RedisSettings, TlsSettings
from gateway.inbox.admin import AdminClient
from gateway.inbox.settings import AdminConnection
from gateway.model import Actor
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.auth.authkit import cert_pem, issue, make_ca
from tests.inbox.inboxkit import Stack, gateway_settings

pytestmark = pytest.mark.integration
INBOX_SPIFFE = "spiffe://capgate.test/inbox"
BOB = Actor(id="bob", kind="user", issuer="test-idp", roles=("manager", "approver"))


@pytest.fixture(scope="module")
async def mtls_gateway(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisProcess
) -> AsyncIterator[tuple[Gateway, Path]]:
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca()
    (d / "ca.crt").write_bytes(cert_pem(ca.cert))
    server_cert, server_key = issue(ca, "gateway", ips=("127.0.0.1",)).write(d, "server")
    issue(ca, "inbox", uris=(INBOX_SPIFFE,)).write(d, "inbox")
    issue(ca, "intruder", uris=("spiffe://capgate.test/intruder",)).write(d, "intruder")
    orders, port = await serve_orders("127.0.0.1:0")
    settings = gateway_settings(f"127.0.0.1:{port}", redis_server.url)
    ca_file = str(d / "ca.crt")

    def mtls_admin(listener: object) -> object:
        return dataclasses.replace(
            listener,  # type: ignore[type-var]
            auth="mtls",
            jwt=None,
            tls=TlsSettings(cert_file=server_cert, key_file=server_key, client_ca_file=ca_file),
            mtls=MtlsAuth(client_ca_file=ca_file, issuer="mtls"),
            on_behalf_of=(("mtls", INBOX_SPIFFE),),
        )

    listeners = tuple(mtls_admin(x) if x.role == "admin" else x for x in settings.listeners)
    gw = await start(
        dataclasses.replace(
            settings,
            listeners=listeners,  # type: ignore[arg-type]
            redis=RedisSettings(url=redis_server.url, key_prefix="capgate-inbox-mtls"),
        )
    )
    yield gw, d
    await gw.stop(0.5)
    await orders.stop(0)


def client(gw: Gateway, d: Path, stem: str) -> AdminClient:
    return AdminClient(
        AdminConnection(
            address=f"127.0.0.1:{gw.ports()['admin']}",
            tls=True,
            ca_file=str(d / "ca.crt"),
            cert_file=str(d / f"{stem}.crt"),
            key_file=str(d / f"{stem}.key"),
        )
    )


async def test_the_allow_listed_certificate_decides_for_the_human(
    mtls_gateway: tuple[Gateway, Path],
) -> None:
    gw, d = mtls_gateway
    stack = Stack(gw, None, "")  # type: ignore[arg-type]  # only its gateway helpers are used
    approval = await stack.request_refund(810, "o-1010")
    inbox, intruder = client(gw, d, "inbox"), client(gw, d, "intruder")
    try:
        listed = await inbox.list([types_pb2.APPROVAL_STATUS_PENDING])
        assert approval.id in {a.id for a in listed.approvals}
        refused = await intruder.decide(
            approval.id, approve=True, note="", human=BOB, input_hash=approval.input_hash
        )
        assert types_pb2.ErrorCode.Name(refused.error.code) == "ERROR_CODE_FORBIDDEN"
        decided = await inbox.decide(
            approval.id, approve=True, note="via mTLS", human=BOB, input_hash=approval.input_hash
        )
        assert not decided.HasField("error"), decided.error
        assert (decided.approval.decided_by.issuer, decided.approval.decided_by.id) == (
            "test-idp",
            "bob",
        )
        assert (decided.approval.decided_via.issuer, decided.approval.decided_via.id) == (
            "mtls",
            INBOX_SPIFFE,
        )
    finally:
        await inbox.close()
        await intruder.close()
