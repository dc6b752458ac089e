"""The inbox web app: pages, decisions, sign-in and live updates (Starlette).

Every state change (decide, sign in, sign out) is a POST that carries a synchronizer CSRF token
bound to the session (or to the identity of a header-authenticated request) and comes from the
inbox's own origin (`web.foreign_origin`: Fetch Metadata, then Origin, then Referer).
Decisions go to ApprovalAdmin with `on_behalf_of` = the human and the input hash the page
showed (SI-5); the refusal ApprovalAdmin answers is shown as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Final
from urllib.parse import quote

import grpc
import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from capgate.v1 import types_pb2
from gateway.audit.events import caller_text
from gateway.inbox import views
from gateway.inbox.admin import AdminClient
from gateway.inbox.auth import ApproverAuth, Human
from gateway.inbox.book import ApprovalBook
from gateway.inbox.edits import Editability, EditPages
from gateway.inbox.grantpages import GrantPages, refusal_of, refused_status
from gateway.inbox.grantviews import suggestion
from gateway.inbox.session import CsrfKeys
from gateway.inbox.sessions import SessionStore, SessionsUnavailable
from gateway.inbox.settings import InboxSettings
from gateway.inbox.signin import SignIn
from gateway.inbox.web import (
    STATIC,
    FormError,
    SecurityHeaders,
    foreign_origin,
    read_form,
    safe_next,
    static_file,
    templates,
)
from gateway.state.connections import connect
from gateway.transport.auth.base import AuthenticationFailed
from gateway.values.redact import MASK

log = logging.getLogger("capgate.inbox")
SSE_KEEPALIVE_S: Final = 15.0
SSE_MAX_S: Final = 600.0  # then the browser reconnects and is authenticated again
MAX_NOTE: Final = 1000


class Inbox:
    """One inbox: settings, the admin client, the approval book and the ASGI app."""

    def __init__(
        self,
        settings: InboxSettings,
        *,
        client: AdminClient | None = None,
        clock: Callable[[], float] = time.time,
        session_clock: Callable[[], float] | None = None,
    ) -> None:
        """`settings.redis.url` must be set (`start_inbox` starts the embedded server when it
        is not); `session_clock` (default `clock`) judges session expiry."""
        self.settings = settings
        self.clock = clock
        secret = settings.session_secret.encode() or secrets.token_bytes(32)
        self.csrf = CsrfKeys(secret)
        self.redis = connect(settings.redis)
        self.sessions = SessionStore(
            self.redis,
            prefix=settings.redis.key_prefix,
            idle_s=settings.session_idle_s,
            lifetime_s=settings.session_lifetime_s,
            max_per_actor=settings.sessions_per_actor,
            clock=session_clock or clock,
        )
        self.auth = ApproverAuth(settings, self.sessions)
        self.client = client or AdminClient(settings.admin, clock=clock)
        self.book = ApprovalBook(
            self.client,
            history_limit=settings.history_limit,
            clock=clock,
            configured_self_approval=settings.reject_self_approval,
        )
        self.secure_cookies = settings.base_url.startswith("https://")
        self.closing = asyncio.Event()
        self.signin = SignIn(self)
        self.editability = Editability(clock)
        self.grants = GrantPages(self)
        self.edits = EditPages(self, self.editability)
        self.app = Starlette(
            routes=[
                Route("/", self.pending_page),
                Route("/history", self.history_page),
                Route("/approvals/{approval_id}", self.detail_page),
                Route("/approvals/{approval_id}/decide", self.decide, methods=["POST"]),
                Route("/approvals/{approval_id}/edit", self.edits.edit, methods=["POST"]),
                Route(
                    "/approvals/{approval_id}/grant",
                    self.grants.approve_and_grant,
                    methods=["POST"],
                ),
                Route("/grants", self.grants.list_page),
                Route("/grants/{grant_id}", self.grants.show_page),
                Route("/grants/{grant_id}/revoke", self.grants.revoke, methods=["POST"]),
                Route("/events", self.events),
                Route("/login", self.signin.page),
                Route("/login", self.signin.login, methods=["POST"]),
                Route("/logout", self.signin.logout, methods=["POST"]),
                Route("/static/{name}", self.static),
                Route("/healthz", self.health),
            ],
            middleware=[Middleware(SecurityHeaders, hsts=self.secure_cookies)],
            exception_handlers={SessionsUnavailable: self._sessions_unavailable},
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        task = asyncio.get_running_loop().create_task(self.book.run(), name="inbox-watch")
        try:
            yield
        finally:
            self.closing.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.client.close()
            await self.redis.aclose()

    # -- helpers -------------------------------------------------------------------------

    async def human(self, request: Request) -> Human | None:
        try:
            return await self.auth.authenticate(request.headers, request.cookies)
        except AuthenticationFailed:
            return None

    async def _sessions_unavailable(self, _request: Request, _exc: Exception) -> Response:
        log.warning("inbox: the session store (Redis) did not answer")
        return self.error(
            None, 503, "Sign-in unavailable", "Sessions cannot be read right now; try again."
        )

    def render(self, name: str, human: Human | None, status: int = 200, **context: Any) -> Response:
        actor = human.actor if human else None
        shown = self._visible(human, self.book.pending()) if human else []
        base = {
            "human": actor,
            "csrf": human.csrf_token(self.csrf) if human else "",
            "can_sign_out": bool(human and human.source == "session"),
            "pending_count": len(shown),
            "live": self.book.live,
            "version": self.book.version,
            "approval_id": "",
            "page": "",
            "title": "Approvals",
            "still": False,  # True: no live updates (pages with forms of their own)
        }
        html = templates().get_template(name).render(**(base | context))
        return HTMLResponse(html, status_code=status)

    def error(self, human: Human | None, status: int, title: str, message: str) -> Response:
        return self.render("error.html", human, status, title=title, message=message)

    def refuse_state_change(self, request: Request) -> str | None:
        """The page to show instead of a POST that did not come from this inbox's pages."""
        why = foreign_origin(request, self.settings.base_url)
        if why is None:
            return None
        return f"The form did not come from this inbox ({why}). Reload the page and try again."

    def _visible(self, human: Human, approvals: list[types_pb2.Approval]) -> list[Any]:
        roles = self.settings.auditor_roles
        return [a for a in approvals if views.visible(human.actor, a, roles)]

    def sign_in_first(self, request: Request) -> Response:
        target = safe_next(
            request.url.path + (f"?{request.url.query}" if request.url.query else "")
        )
        return RedirectResponse(f"/login?next={views_quote(target)}", status_code=303)

    # -- pages ---------------------------------------------------------------------------

    async def pending_page(self, request: Request) -> Response:
        return await self._list_page(request, "pending")

    async def history_page(self, request: Request) -> Response:
        return await self._list_page(request, "history")

    async def _list_page(self, request: Request, page: str) -> Response:
        human = await self.human(request)
        if human is None:
            return self.sign_in_first(request)
        q = request.query_params
        filters = views.Filters.parse(q.get("capability"), q.get("risk"))
        source = self.book.pending() if page == "pending" else self.book.history()
        shown = self._visible(human, source)
        now = self.clock()
        rows = [views.row(a, human.actor, now) for a in shown if filters.keep(a)]
        return self.render(
            f"{page}.html",
            human,
            page=page,
            rows=rows,
            filters=filters,
            capabilities=views.capabilities_of(shown),
            risks=views.RISKS,
            title="Pending approvals" if page == "pending" else "History",
        )

    async def detail_page(self, request: Request) -> Response:
        human = await self.human(request)
        if human is None:
            return self.sign_in_first(request)
        return self.detail(human, request.path_params["approval_id"])

    def detail(
        self,
        human: Human,
        approval_id: str,
        *,
        status: int = 200,
        error: dict[str, str] | None = None,
        note: str = "",
        edit: dict[str, Any] | None = None,
        grant: dict[str, str] | None = None,
        grant_refusal: dict[str, str] | None = None,
    ) -> Response:
        """An approval's page; `error` a refused decision, `edit` and `grant` what the edit
        and grant forms hold (a preview, a problem), `grant_refusal` a refused CreateGrant."""
        approval = self.book.get(approval_id)
        if approval is None or not self._visible(human, [approval]):
            if error is not None:  # refused, and not something this human may look at
                return self.error(human, status, "Refused", f"{error['code']}: {error['message']}")
            return self.error(human, 404, "Not found", "No such approval, or not one you may see.")
        if approval.edited:
            self.editability.learn(approval.capability_id, editable=True)
        r = views.row(approval, human.actor, self.clock())
        prefill = suggestion(approval.input_json)
        grant_form = {"expires_in": "1h", "max_uses": "", "max_total": "", "problem": ""}
        grant_form |= prefill | (grant or {})
        edit_form: dict[str, Any] = {
            "text": r["input"],
            "changes": [],
            "problem": "",
            "open": False,
        }
        edit_form |= edit or {}
        return self.render(
            "detail.html",
            human,
            status,
            r=r,
            error=error,
            note=note,
            edit=edit_form,
            edit_offered=self.editability.offered(approval.capability_id),
            edit_masked=MASK in r["input"],
            grant=grant_form,
            grant_refusal=grant_refusal,
            approval_id=approval.id,
            title=approval.capability_id,
        )

    # -- state changes -------------------------------------------------------------------

    async def checked_form(
        self, request: Request, doing: str = "decide"
    ) -> tuple[Human, dict[str, str]] | Response:
        """The signed-in human and the form of a state-changing POST that came from this
        inbox's own pages with its CSRF token; else the page refusing it."""
        human = await self.human(request)
        if human is None:
            return self.error(None, 401, "Signed out", f"Sign in again to {doing}.")
        try:
            form = await read_form(request)
        except FormError as exc:
            return self.error(human, exc.status, "Bad request", str(exc))
        refusal = self.refuse_state_change(request)
        if refusal is not None:
            return self.error(human, 403, "Refused", refusal)
        if not human.csrf_ok(self.csrf, form.get("csrf", "")):
            return self.error(
                human,
                403,
                "Refused",
                "The form did not come from this inbox "
                "(missing or invalid CSRF token). Reload the page and try again.",
            )
        return human, form

    def gateway_down(
        self, human: Human, call: str, exc: grpc.aio.AioRpcError, what: str
    ) -> Response:
        log.warning("inbox: %s failed: %s", call, exc.code().name)
        return self.error(
            human, 502, "Gateway unavailable", f"The gateway did not answer; {what}. Try again."
        )

    async def decide(self, request: Request) -> Response:
        checked = await self.checked_form(request)
        if isinstance(checked, Response):
            return checked
        human, form = checked
        verdict, note = form.get("verdict"), form.get("note", "")[:MAX_NOTE]
        if verdict not in ("approve", "reject"):
            return self.error(human, 400, "Bad request", "Choose approve or reject.")
        approval_id = request.path_params["approval_id"]
        try:
            reply = await self.client.decide(
                approval_id,
                approve=verdict == "approve",
                note=note,
                input_hash=form.get("input_hash", ""),
                human=human.actor,
            )
        except grpc.aio.AioRpcError as exc:
            return self.gateway_down(human, "DecideApproval", exc, "nothing was decided")
        if reply.HasField("error"):
            error = refusal_of(reply.error)
            return self.detail(
                human, approval_id, status=refused_status(error), error=error, note=note
            )
        self.book.merge(reply.approval)
        who, which = caller_text(human.actor.id), caller_text(approval_id)
        log.info("inbox: %s %s approval %s", who, verdict, which)
        return RedirectResponse(f"/approvals/{views_quote(approval_id)}", status_code=303)

    # -- live updates, static files, health ----------------------------------------------

    async def events(self, request: Request) -> Response:
        human = await self.human(request)
        if human is None:
            return Response("sign in first", status_code=401, media_type="text/plain")
        raw = request.query_params.get("since", "0")
        since = int(raw) if raw.isdigit() and len(raw) < 16 else 0
        return StreamingResponse(
            self._stream(human, since),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _stream(self, human: Human, since: int) -> AsyncIterator[bytes]:
        seen, deadline = since, time.monotonic() + SSE_MAX_S
        yield b"retry: 2000\n\n"
        while not self.closing.is_set() and time.monotonic() < deadline:
            version = await self.book.wait_change(seen, SSE_KEEPALIVE_S)
            if human.session is not None:  # signed out or expired meanwhile: stop here
                current = await self.sessions.read(human.session.sid, touch=False)
                if current is None:
                    return
                human = dataclasses.replace(human, actor=current.actor)
            if version == seen:
                yield b": keep-alive\n\n"
                continue
            # Only ids of approvals this human may see; never any content.
            ids = [a.id for a in self._visible(human, self.book.changed_since(seen))]
            seen = version
            if ids:
                data = orjson.dumps({"version": version, "ids": ids})
                yield b"event: change\ndata: " + data + b"\n\n"

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(static_file(name), media_type=STATIC[name])

    async def health(self, _request: Request) -> Response:
        ready = self.book.synced_at is not None
        return JSONResponse(
            {"ready": ready, "live": self.book.live}, status_code=200 if ready else 503
        )


def views_quote(value: str) -> str:
    return quote(value, safe="/?=&")
