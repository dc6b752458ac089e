"""Listener modes without a credential: `trusted-local` and `none` (DESIGN §12).

`trusted-local`: the co-located application asserts the actor in `x-capgate-actor-*` metadata.
This is only sound because `build_authenticator` allows it solely on a unix socket (file mode
0660 in a directory mounted only into the app container), where the kernel decides who can
connect; it is refused on admin and MCP listeners. `none`: every caller is anonymous.
"""

from __future__ import annotations

from typing import Final

from gateway.config.settings import TrustedLocalAuth
from gateway.model import ANONYMOUS, Actor
from gateway.transport.auth.base import (
    AUTHENTICATED_KINDS,
    AuthContext,
    AuthenticationFailed,
    Metadata,
    metadata_values,
)

ACTOR_ID: Final = "x-capgate-actor-id"
ACTOR_KIND: Final = "x-capgate-actor-kind"
ACTOR_ROLES: Final = "x-capgate-actor-roles"
DEFAULT_KIND: Final = "user"
MAX_VALUE_CHARS: Final = 1024


def _single(metadata: Metadata, key: str) -> str | None:
    values = metadata_values(metadata, key)
    if len(values) > 1:
        raise AuthenticationFailed(f"more than one {key} header")
    if not values:
        return None
    value = values[0].strip()
    # Identities end up in audit lines and approval records: no control characters (log
    # injection), bounded length.
    if len(value) > MAX_VALUE_CHARS or not value.isprintable():
        raise AuthenticationFailed(f"invalid {key} header")
    return value or None


class TrustedLocalAuthenticator:
    """Actor from `x-capgate-actor-id`, `-kind` (user|service|agent|anonymous), `-roles` (csv)."""

    def __init__(self, settings: TrustedLocalAuth | None = None) -> None:
        self._settings = settings or TrustedLocalAuth()
        if not self._settings.issuer:
            raise ValueError("trusted-local auth needs an issuer name")

    def authenticate(self, metadata: Metadata, auth_context: AuthContext, peer: str) -> Actor:
        actor_id = _single(metadata, ACTOR_ID)
        kind = _single(metadata, ACTOR_KIND)
        roles = _single(metadata, ACTOR_ROLES)
        if kind == "anonymous" or (actor_id is None and kind is None and roles is None):
            if not self._settings.allow_anonymous:
                raise AuthenticationFailed("actor required")
            return ANONYMOUS
        if actor_id is None:
            raise AuthenticationFailed("actor id required")
        kind = kind or DEFAULT_KIND
        if kind not in AUTHENTICATED_KINDS:
            raise AuthenticationFailed("actor kind not allowed")
        return Actor(
            id=actor_id,
            kind=kind,
            issuer=self._settings.issuer,
            roles=tuple(r.strip() for r in (roles or "").split(",") if r.strip()),
        )


class AnonymousAuthenticator:
    """`auth: none` — every caller is the anonymous actor (never on admin listeners)."""

    def authenticate(self, metadata: Metadata, auth_context: AuthContext, peer: str) -> Actor:
        return ANONYMOUS
