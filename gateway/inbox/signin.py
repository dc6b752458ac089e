"""Signing in and out of the inbox with a bearer JWT pasted into a form.

The token is validated like any gateway credential (`ApproverAuth.verify_token`); the
server-side session it buys (`gateway.inbox.sessions`) lasts no longer than the token, and
signing out ends it at once. The sign-in form is protected against login CSRF
(an attacker signing a victim into the attacker's account) by a token bound to a pre-session
nonce in its own cookie; signing out needs the session's CSRF token.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gateway.audit.events import caller_text
from gateway.inbox.session import LOGIN_COOKIE, SESSION_COOKIE, login_binding
from gateway.inbox.web import FormError, read_form, safe_next
from gateway.transport.auth.base import AuthenticationFailed
from gateway.values import jws

if TYPE_CHECKING:
    from gateway.inbox.auth import ApproverAuth, Human
    from gateway.inbox.session import CsrfKeys
    from gateway.inbox.sessions import SessionStore

log = logging.getLogger("capgate.inbox")
LOGIN_FORM_S = 1800


class Pages(Protocol):
    """What signing in uses of the inbox app (gateway/inbox/app.py's `Inbox`), named here so
    that the app imports this module and not the other way round."""

    csrf: CsrfKeys
    sessions: SessionStore
    auth: ApproverAuth
    secure_cookies: bool

    async def human(self, request: Request) -> Human | None: ...
    def render(
        self, name: str, human: Human | None, status: int = 200, **context: Any
    ) -> Response: ...
    def error(self, human: Human | None, status: int, title: str, message: str) -> Response: ...
    def refuse_state_change(self, request: Request) -> str | None: ...


class SignIn:
    def __init__(self, inbox: Pages) -> None:
        self.inbox = inbox

    async def page(self, request: Request) -> Response:
        if await self.inbox.human(request) is not None:
            return RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
        return self._form(request.query_params.get("next"), None)

    def _form(self, next_path: str | None, error: str | None, status: int = 200) -> Response:
        nonce = secrets.token_urlsafe(16)
        response = self.inbox.render(
            "login.html",
            None,
            status,
            next=safe_next(next_path),
            error=error,
            title="Sign in",
            csrf=self.inbox.csrf.token(login_binding(nonce)),
        )
        self.cookie(response, LOGIN_COOKIE, nonce, max_age=LOGIN_FORM_S)
        return response

    async def login(self, request: Request) -> Response:
        inbox = self.inbox
        try:
            form = await read_form(request)
        except FormError as exc:
            return inbox.error(None, exc.status, "Bad request", str(exc))
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        token_ok = bool(nonce) and inbox.csrf.ok(login_binding(nonce), form.get("csrf", ""))
        refusal = inbox.refuse_state_change(request)
        if refusal is not None:
            return self._form(form.get("next"), refusal, 403)
        if not token_ok:
            return self._form(form.get("next"), "The sign-in form expired. Try again.", 403)
        token = form.get("token", "").strip()
        try:
            actor = inbox.auth.verify_token(token)
            expires = float(jws.parse_compact(token).payload["exp"])
        except AuthenticationFailed as exc:
            # `reason` is a fixed public phrase ("wrong audience"), never token content.
            return self._form(form.get("next"), f"The token was refused: {exc.reason}.", 401)
        session = await inbox.sessions.create(actor, not_after=expires)
        response = RedirectResponse(safe_next(form.get("next")), status_code=303)
        lifetime = max(1, int(session.expires_at - session.created))
        self.cookie(response, SESSION_COOKIE, session.sid, max_age=lifetime)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        log.info("inbox: %s signed in", caller_text(actor.id))
        return response

    async def logout(self, request: Request) -> Response:
        inbox = self.inbox
        human = await inbox.human(request)
        if human is not None:
            try:
                form = await read_form(request)
            except FormError as exc:
                return inbox.error(human, exc.status, "Bad request", str(exc))
            refusal = inbox.refuse_state_change(request)
            if refusal is not None:
                return inbox.error(human, 403, "Refused", refusal)
            if not human.csrf_ok(inbox.csrf, form.get("csrf", "")):
                return inbox.error(human, 403, "Refused", "Missing or invalid CSRF token.")
            if human.session is not None:
                await inbox.sessions.delete(human.session.sid)  # the cookie is dead from now
                log.info("inbox: %s signed out", caller_text(human.actor.id))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    def cookie(self, response: Response, name: str, value: str, *, max_age: int) -> None:
        """HttpOnly, SameSite=Strict, Secure behind an https base URL."""
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            httponly=True,
            samesite="strict",
            secure=self.inbox.secure_cookies,
        )
