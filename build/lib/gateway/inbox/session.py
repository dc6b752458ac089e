"""Signed session cookies and CSRF tokens of the inbox (stateless, HMAC-SHA256).

The session cookie holds the human as the bearer JWT or proxy assertion named them — (issuer,
id), kind, roles — plus a random session id and an expiry no later than the credential's own;
it is HttpOnly and SameSite=Strict. CSRF tokens are synchronizer tokens derived from the
session id (or, for header-authenticated requests, from the identity): an attacker's page can
neither read nor compute them. Keys are derived per purpose from one secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.model import Actor

SESSION_COOKIE: Final = "capgate_inbox"
LOGIN_COOKIE: Final = "capgate_inbox_login"
MAX_COOKIE_CHARS: Final = 4096


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Session:
    actor: Actor
    sid: str
    expires_at: float


class SessionCodec:
    """Issues and reads session cookies; derives and checks CSRF tokens."""

    def __init__(
        self, secret: bytes, *, lifetime_s: int, clock: Callable[[], float] = time.time
    ) -> None:
        if len(secret) < 32:
            raise ValueError("the session secret must be at least 32 bytes")
        self._session_key = hmac.digest(secret, b"capgate-inbox/session", "sha256")
        self._csrf_key = hmac.digest(secret, b"capgate-inbox/csrf", "sha256")
        self._lifetime_s = lifetime_s
        self._clock = clock

    def issue(self, actor: Actor, *, not_after: float) -> tuple[str, Session]:
        """A cookie value for `actor`, valid until the earlier of `not_after` and the lifetime."""
        expires = min(not_after, self._clock() + self._lifetime_s)
        sid = secrets.token_urlsafe(16)
        payload = _b64(
            orjson.dumps(
                {
                    "iss": actor.issuer,
                    "sub": actor.id,
                    "kind": actor.kind,
                    "roles": list(actor.roles),
                    "exp": expires,
                    "sid": sid,
                }
            )
        )
        mac = _b64(hmac.digest(self._session_key, payload.encode(), "sha256"))
        return f"{payload}.{mac}", Session(actor, sid, expires)

    def read(self, value: str) -> Session | None:
        """The session in a cookie value, or None when forged, malformed or expired."""
        if len(value) > MAX_COOKIE_CHARS or value.count(".") != 1:
            return None
        payload, mac = value.split(".")
        expected = _b64(hmac.digest(self._session_key, payload.encode(), "sha256"))
        if not hmac.compare_digest(mac, expected):
            return None
        try:
            data: dict[str, Any] = orjson.loads(_unb64(payload))
        except (binascii.Error, ValueError):
            return None
        if self._clock() >= data["exp"]:
            return None
        actor = Actor(
            id=data["sub"],
            kind=data["kind"],
            issuer=data["iss"],
            roles=tuple(data["roles"]),
            attributes=types.MappingProxyType({}),
        )
        return Session(actor, data["sid"], data["exp"])

    def csrf_token(self, binding: str) -> str:
        """The synchronizer token of a session (or identity) binding."""
        return _b64(hmac.digest(self._csrf_key, binding.encode(), "sha256"))

    def csrf_ok(self, binding: str, token: str) -> bool:
        return bool(token) and hmac.compare_digest(token, self.csrf_token(binding))


def identity_binding(actor: Actor) -> str:
    """CSRF binding of a request authenticated by a header (no cookie session)."""
    digest = hashlib.sha256(f"{actor.issuer}\0{actor.id}".encode()).hexdigest()
    return f"id:{digest}"


def session_binding(session: Session) -> str:
    return f"sid:{session.sid}"


def login_binding(nonce: str) -> str:
    return f"login:{nonce}"
