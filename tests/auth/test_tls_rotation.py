"""TLS certificates rotate without a restart: a real grpc.aio server with the listener's
credentials, files replaced as cert-manager or a mounted Secret would replace them, and new
connections (one per check) that see the new certificate, the new client CA, or, for a broken
or half-written rotation, the certificate that was serving."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from authkit import Issued, cert_pem, issue, make_ca, private_pem

from gateway.config.settings import Listener, TlsSettings
from gateway.transport.auth.listeners import server_credentials

METHOD = "/capgate.test.Echo/Ping"
pytestmark = pytest.mark.integration


@dataclass
class Served:
    port: int
    cert: Path
    key: Path
    ca: Path


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _server_cert(ca: Issued) -> Issued:
    return issue(ca, "gateway", dns=("localhost",), ips=("127.0.0.1",))


async def _serve(tmp_path: Path, server: Issued, client_ca: Issued | None) -> AsyncIterator[Served]:
    cert, key, ca = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt"
    cert.write_bytes(cert_pem(server.cert))
    key.write_bytes(private_pem(server.key))
    if client_ca is not None:
        ca.write_bytes(cert_pem(client_ca.cert))
    listener = Listener(
        name="agents",
        address="127.0.0.1:0",
        surface="agent",
        auth="mtls" if client_ca is not None else "none",
        tls=TlsSettings(
            cert_file=str(cert),
            key_file=str(key),
            client_ca_file=str(ca) if client_ca is not None else None,
        ),
    )

    async def ping(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b"pong"

    srv = grpc.aio.server()
    srv.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "capgate.test.Echo", {"Ping": grpc.unary_unary_rpc_method_handler(ping)}
            ),
        )
    )
    credentials = server_credentials(listener)
    assert credentials is not None
    port = srv.add_secure_port("127.0.0.1:0", credentials)
    await srv.start()
    yield Served(port, cert, key, ca)
    await srv.stop(None)


async def _connects(served: Served, trust: Issued, client: Issued | None = None) -> bool:
    """A new connection (its own subchannel pool) that trusts only `trust`."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=cert_pem(trust.cert),
        private_key=private_pem(client.key) if client else None,
        certificate_chain=cert_pem(client.cert) if client else None,
    )
    options = [("grpc.use_local_subchannel_pool", 1)]
    async with grpc.aio.secure_channel(
        f"127.0.0.1:{served.port}", credentials, options=options
    ) as channel:
        try:
            return await channel.unary_unary(METHOD)(b"", timeout=5) == b"pong"
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return False


@pytest.fixture
async def tls_only(tmp_path: Path) -> AsyncIterator[tuple[Served, Issued]]:
    ca = make_ca("first CA")
    async for served in _serve(tmp_path, _server_cert(ca), None):
        yield served, ca


async def test_a_replaced_certificate_serves_the_next_connection(
    tls_only: tuple[Served, Issued],
) -> None:
    served, first = tls_only
    assert await _connects(served, first)
    second = make_ca("second CA")
    renewed = _server_cert(second)
    _replace(served.key, private_pem(renewed.key))
    _replace(served.cert, cert_pem(renewed.cert))
    assert await _connects(served, second)
    assert not await _connects(served, first)


async def test_a_half_written_or_broken_rotation_keeps_the_certificate_in_use(
    tls_only: tuple[Served, Issued],
) -> None:
    served, first = tls_only
    other = _server_cert(make_ca("other CA"))
    _replace(served.cert, cert_pem(other.cert))  # the new certificate, still the old key
    assert await _connects(served, first)  # the pair does not match: nothing changes
    _replace(served.cert, b"-----BEGIN CERTIFICATE-----\nnot base64\n")
    assert await _connects(served, first)
    _replace(served.key, private_pem(other.key))
    _replace(served.cert, cert_pem(other.cert))  # now a matching pair: it is served
    assert not await _connects(served, first)


async def test_a_rotated_client_ca_decides_which_client_certificates_pass(
    tmp_path: Path,
) -> None:
    server_ca, old_clients, new_clients = make_ca("server CA"), make_ca("old"), make_ca("new")
    old_client, new_client = issue(old_clients, "agent"), issue(new_clients, "agent")
    async for served in _serve(tmp_path, _server_cert(server_ca), old_clients):
        assert await _connects(served, server_ca, old_client)
        assert not await _connects(served, server_ca, new_client)
        _replace(served.ca, cert_pem(new_clients.cert))
        assert await _connects(served, server_ca, new_client)
        assert not await _connects(served, server_ca, old_client)
        assert not await _connects(served, server_ca, None)  # still required


def test_files_that_do_not_match_refuse_to_start(tmp_path: Path) -> None:
    a, b = _server_cert(make_ca("a")), _server_cert(make_ca("b"))
    (tmp_path / "tls.crt").write_bytes(cert_pem(a.cert))
    (tmp_path / "tls.key").write_bytes(private_pem(b.key))
    listener = Listener(
        name="agents",
        address="127.0.0.1:0",
        surface="agent",
        auth="none",
        tls=TlsSettings(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key")),
    )
    with pytest.raises(ValueError, match="does not belong to the private key") as err:
        server_credentials(listener)
    assert "BEGIN" not in str(err.value)
