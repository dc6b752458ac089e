"""Cookie names and the HMAC-derived CSRF tokens of the inbox.

Sign-in sessions are server-side (`gateway.inbox.sessions`), each with a random CSRF token of its
own. Requests without a session — authenticated by a bearer JWT or a proxy assertion header, and
the sign-in form before any session exists — use synchronizer tokens derived here with HMAC from
the identity or from a pre-session nonce: an attacker's page can neither read nor compute them.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from gateway.model import Actor

SESSION_COOKIE: Final = "capgate_inbox"
LOGIN_COOKIE: Final = "capgate_inbox_login"


class CsrfKeys:
    """Derives and checks CSRF tokens of identity and sign-in-nonce bindings."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the session secret must be at least 32 bytes")
        self._key = hmac.digest(secret, b"capgate-inbox/csrf", "sha256")

    def token(self, binding: str) -> str:
        digest = hmac.digest(self._key, binding.encode(), "sha256")
        return digest.hex()

    def ok(self, binding: str, token: str) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.token(binding).encode())


def identity_binding(actor: Actor) -> str:
    """CSRF binding of a request authenticated by a header (no cookie session)."""
    digest = hashlib.sha256(f"{actor.issuer}\0{actor.id}".encode()).hexdigest()
    return f"id:{digest}"


def login_binding(nonce: str) -> str:
    return f"login:{nonce}"
