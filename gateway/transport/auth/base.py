"""Stage 1 — transport authentication: the `Authenticator` protocol and its per-listener factory.

Every listener has exactly one authenticator, chosen by its `auth` mode (DESIGN §12 "Listeners and
identity"). The actor comes only from what the transport authenticated (SI-3): a verified bearer
token, a verified client certificate, or — on a unix socket only — the co-located application's
assertion. Authenticators are synchronous and cheap (verified tokens are cached), so the grpc.aio
handlers call them inline with `context.invocation_metadata()`, `context.auth_context()` and
`context.peer()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol, TypeAlias

import grpc

from gateway.config.settings import Listener
from gateway.model import Actor

Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]
AuthContext: TypeAlias = Mapping[str, Sequence[bytes]]

CAPGATE_METADATA_PREFIX: Final = "x-capgate-"
# Kinds an authenticated (non-anonymous) actor may have; `anonymous` is only ever granted by the
# listener's own mode (`none`, or trusted-local with allow_anonymous), never by a credential.
AUTHENTICATED_KINDS: Final[frozenset[str]] = frozenset({"user", "service", "agent"})


class AuthenticationFailed(Exception):
    """The transport credential was missing or invalid.

    `reason` is a fixed, public-safe phrase ("token expired", "wrong audience"); it never holds
    token contents, claim values or key material, so it may be logged and audited as is.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Authenticator(Protocol):
    """Turns one call's transport credentials into the actor (SI-3), or raises."""

    def authenticate(self, metadata: Metadata, auth_context: AuthContext, peer: str) -> Actor:
        """The authenticated actor, or `AuthenticationFailed` with a public-safe reason."""
        ...


def strip_capgate_metadata(metadata: Metadata) -> tuple[tuple[str, str | bytes], ...]:
    """`metadata` without any `x-capgate-*` entry.

    Used on JWT and mTLS listeners: a caller there must not be able to assert actor, surface or
    approval facts through metadata the gateway itself uses (SI-2, SI-3). Keys are compared
    case-insensitively although gRPC already lower-cases them.
    """
    return tuple(
        (key, value)
        for key, value in metadata
        if not key.lower().startswith(CAPGATE_METADATA_PREFIX)
    )


def metadata_values(metadata: Metadata, key: str) -> list[str]:
    """Every value sent under `key` as text; undecodable binary values are refused."""
    out: list[str] = []
    for name, value in metadata:
        if name.lower() != key:
            continue
        if isinstance(value, str):
            out.append(value)
            continue
        try:
            out.append(value.decode("utf-8"))
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed credentials") from None
    return out


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
    # Imported here: each mode's module imports AuthenticationFailed from this one.
    from gateway.transport.auth.jwt import JwtAuthenticator  # noqa: PLC0415
    from gateway.transport.auth.local import AnonymousAuthenticator, TrustedLocalAuthenticator  # noqa: PLC0415
    from gateway.transport.auth.mtls import MtlsAuthenticator  # noqa: PLC0415

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
