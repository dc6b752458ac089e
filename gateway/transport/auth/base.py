"""Stage 1 — transport authentication: the `Authenticator` protocol and what every mode shares.

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
