"""Each listener's authentication, built from its config: the authenticator of its mode (stage 1,
SI-3), refusing the combinations §12 forbids, and its TLS server credentials.

Apart from gateway/transport/auth/base.py (the `Authenticator` protocol and the errors every
mode shares), so that the modes import base and this module imports the modes.
"""

from __future__ import annotations

import grpc

from gateway.config.settings import Listener
from gateway.transport.auth.base import Authenticator
from gateway.transport.auth.jwt import JwtAuthenticator
from gateway.transport.auth.local import AnonymousAuthenticator, TrustedLocalAuthenticator
from gateway.transport.auth.mtls import MtlsAuthenticator


def _is_unix_socket(address: str) -> bool:
    # `unix-abstract:` sockets have no file permissions: anyone in the network namespace could
    # connect, so they do not count as a unix socket for trusted-local.
    return address.startswith("unix:") and not address.startswith("unix-abstract:")


def _client_ca_file(listener: Listener) -> str | None:
    tls_ca = listener.tls.client_ca_file if listener.tls else None
    mtls_ca = (listener.mtls.client_ca_file or None) if listener.mtls else None
    if tls_ca and mtls_ca and tls_ca != mtls_ca:
        raise ValueError(
            f"listener {listener.name!r}: tls.client_ca_file and mtls.client_ca_file differ"
        )
    return tls_ca or mtls_ca


def build_authenticator(listener: Listener) -> Authenticator:
    """The authenticator for `listener`, or `ValueError` for a combination §12 forbids."""
    name = listener.name
    if listener.role == "admin" and listener.auth not in {"jwt", "mtls"}:
        raise ValueError(
            f"listener {name!r}: admin listeners need auth 'jwt' or 'mtls' "
            f"(approvers must be authenticated), not {listener.auth!r}"
        )
    if listener.auth == "jwt":
        if listener.jwt is None:
            raise ValueError(f"listener {name!r}: auth 'jwt' needs a 'jwt' section")
        return JwtAuthenticator(listener.jwt)
    if listener.auth == "mtls":
        if listener.tls is None or _client_ca_file(listener) is None:
            raise ValueError(
                f"listener {name!r}: auth 'mtls' needs tls.cert_file, tls.key_file and a "
                "client CA (tls.client_ca_file)"
            )
        return MtlsAuthenticator(listener.mtls) if listener.mtls else MtlsAuthenticator()
    if listener.auth == "trusted-local":
        if not _is_unix_socket(listener.address):
            raise ValueError(
                f"listener {name!r}: auth 'trusted-local' is allowed only on a unix socket "
                "address (unix:///path), where file permissions decide who may connect"
            )
        if listener.surface == "mcp":
            raise ValueError(f"listener {name!r}: auth 'trusted-local' is refused on MCP listeners")
        settings = listener.trusted_local
        return TrustedLocalAuthenticator(settings) if settings else TrustedLocalAuthenticator()
    if listener.auth == "none":
        return AnonymousAuthenticator()
    raise ValueError(f"listener {name!r}: unknown auth mode {listener.auth!r}")


def server_credentials(listener: Listener) -> grpc.ServerCredentials | None:
    """TLS credentials for `listener` (client certificates required when a client CA is set).

    None means an insecure port: only valid when the listener has no `tls` section and does not
    use mTLS.
    """
    ca_file = _client_ca_file(listener)
    if listener.tls is None:
        if listener.auth == "mtls" or ca_file is not None:
            raise ValueError(f"listener {listener.name!r}: mTLS needs a 'tls' section")
        return None
    # Imported here: gateway.transport.auth.tls pulls in cryptography's x509, only TLS listeners
    # need it.
    from gateway.transport.auth.tls import RotatingCertificates  # noqa: PLC0415

    # With a client CA, grpc verifies the client chain against it during the handshake;
    # MtlsAuthenticator relies on that (it reads identities, it does not verify). The files are
    # re-read when they change, before the next handshake (gateway.transport.auth.tls).
    tls = listener.tls
    return RotatingCertificates(listener.name, tls.cert_file, tls.key_file, ca_file).credentials()
