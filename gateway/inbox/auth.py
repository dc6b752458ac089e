"""Who is at the keyboard: approver authentication for the inbox (SI-3 for humans).

Order: an `Authorization: Bearer` JWT, then the proxy's signed identity assertion header, then
the session cookie set by the sign-in page. A credential that is presented but invalid is a
failure — never a fall-through to a weaker one. JWTs and assertions are checked by
`gateway.transport.auth.jwt.JwtAuthenticator`, the gateway's own validation (pinned algorithms, exp,
aud, iss allow-list, bounded lifetime), on every request; a session cookie is looked up in the
server-side session store on every request (its roles with it: `gateway.inbox.sessions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.inbox.session import SESSION_COOKIE, CsrfKeys, identity_binding
from gateway.inbox.sessions import Session, SessionStore, csrf_matches
from gateway.inbox.settings import InboxSettings
from gateway.model import Actor
from gateway.transport.auth.base import AuthenticationFailed
from gateway.transport.auth.jwt import JwtAuthenticator


@dataclass(frozen=True, slots=True)
class Human:
    """An authenticated approver, how it authenticated, and its session if it has one."""

    actor: Actor
    source: str  # bearer | proxy | session
    session: Session | None = None

    def csrf_token(self, keys: CsrfKeys) -> str:
        if self.session is not None:
            return self.session.csrf
        return keys.token(identity_binding(self.actor))

    def csrf_ok(self, keys: CsrfKeys, token: str) -> bool:
        if self.session is not None:
            return csrf_matches(self.session, token)
        return keys.ok(identity_binding(self.actor), token)


class ApproverAuth:
    def __init__(self, settings: InboxSettings, sessions: SessionStore) -> None:
        self.jwt = JwtAuthenticator(settings.jwt) if settings.jwt else None
        self.proxy = JwtAuthenticator(settings.proxy.jwt) if settings.proxy else None
        self.proxy_header = settings.proxy.header if settings.proxy else ""
        self.sessions = sessions

    def verify_token(self, token: str) -> Actor:
        """A pasted bearer JWT (the sign-in page); `AuthenticationFailed` when invalid."""
        if self.jwt is None:
            raise AuthenticationFailed("bearer tokens are not accepted here")
        return self.jwt.authenticate([("authorization", f"Bearer {token}")], {}, "")

    async def authenticate(
        self, headers: Mapping[str, str], cookies: Mapping[str, str]
    ) -> Human | None:
        """The human behind a request; None when no credential was presented or the session
        is over. `SessionsUnavailable` when the session store cannot be read."""
        authorization = headers.get("authorization")
        if authorization is not None:
            if self.jwt is None:
                raise AuthenticationFailed("bearer tokens are not accepted here")
            actor = self.jwt.authenticate([("authorization", authorization)], {}, "")
            return Human(actor, "bearer")
        if self.proxy is not None:
            assertion = headers.get(self.proxy_header)
            if assertion is not None:
                actor = self.proxy.authenticate([("authorization", f"Bearer {assertion}")], {}, "")
                return Human(actor, "proxy")
        cookie = cookies.get(SESSION_COOKIE)
        if cookie:
            session = await self.sessions.read(cookie)
            if session is None:
                return None  # signed out, expired or never issued: sign in again
            return Human(session.actor, "session", session)
        return None
