"""The inbox's standing grants: "approve and grant similar calls" on an approval's page, the
grants list, one grant's page, and revoking one.

Every state change is a POST checked like a decision (session, CSRF token, own origin: the
app's `checked_form`) and goes to ApprovalAdmin as the inbox identity with `on_behalf_of` = the
human; the gateway decides (roles, constraint compilation, limits) and its refusal is shown as
is. Approving and granting are two calls: DecideApproval, then CreateGrant from the approval;
when the second is refused the page says the approval stands and why the grant was refused.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, Protocol

import grpc
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from capgate.v1 import types_pb2
from gateway.audit.events import caller_text
from gateway.inbox import grantviews
from gateway.inbox.grantviews import GrantFilters, GrantFormError
from gateway.inbox.web import segment

if TYPE_CHECKING:
    from gateway.inbox.admin import AdminClient
    from gateway.inbox.auth import Human
    from gateway.inbox.book import ApprovalBook
    from gateway.inbox.settings import InboxSettings

log = logging.getLogger("capgate.inbox")
MAX_NOTE: Final = 1000
PAGE_SIZE: Final = 100


class Pages(Protocol):
    """What the grant pages use of the inbox app (gateway/inbox/app.py's `Inbox`)."""

    settings: InboxSettings
    client: AdminClient
    book: ApprovalBook

    async def human(self, request: Request) -> Human | None: ...
    async def checked_form(
        self, request: Request, doing: str = "decide"
    ) -> tuple[Human, dict[str, str]] | Response: ...
    def render(
        self, name: str, human: Human | None, status: int = 200, **context: Any
    ) -> Response: ...
    def error(self, human: Human | None, status: int, title: str, message: str) -> Response: ...
    def sign_in_first(self, request: Request) -> Response: ...
    def gateway_down(
        self, human: Human, call: str, exc: grpc.aio.AioRpcError, what: str
    ) -> Response: ...
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
    ) -> Response: ...


def refusal_of(error: types_pb2.CapabilityError) -> dict[str, str]:
    """A gateway refusal as the pages show it: its code (without the prefix) and message."""
    code = str(types_pb2.ErrorCode.Name(error.code)).removeprefix("ERROR_CODE_")
    return {"code": code, "message": error.message}


_REFUSED_STATUS: Final = {"FORBIDDEN": 403, "APPROVAL_SELF_APPROVAL": 403}


def refused_status(error: dict[str, str]) -> int:
    return _REFUSED_STATUS.get(error["code"], 409)


class GrantPages:
    def __init__(self, inbox: Pages) -> None:
        self.inbox = inbox

    # -- approve and grant -----------------------------------------------------------------

    async def approve_and_grant(self, request: Request) -> Response:
        inbox = self.inbox
        checked = await inbox.checked_form(request)
        if isinstance(checked, Response):
            return checked
        human, form = checked
        approval_id = request.path_params["approval_id"]
        note = form.get("note", "")[:MAX_NOTE]
        values = {k: form.get(k, "") for k in ("expires_in", "max_uses", "max_total", "amount")}
        values["constraint"] = form.get("constraint", "")
        try:
            create = grantviews.grant_request(form, approval_id)
        except GrantFormError as exc:  # nothing sent: neither approved nor granted
            return inbox.detail(
                human, approval_id, status=400, note=note, grant=values | {"problem": str(exc)}
            )
        try:
            decided = await inbox.client.decide(
                approval_id,
                approve=True,
                note=note,
                input_hash=form.get("input_hash", ""),
                human=human.actor,
            )
        except grpc.aio.AioRpcError as exc:
            return inbox.gateway_down(human, "DecideApproval", exc, "nothing was decided")
        if decided.HasField("error"):
            error = refusal_of(decided.error)
            return inbox.detail(
                human,
                approval_id,
                status=refused_status(error),
                error=error,
                note=note,
                grant=values,
            )
        inbox.book.merge(decided.approval)
        log.info(
            "inbox: %s approve approval %s", caller_text(human.actor.id), caller_text(approval_id)
        )
        return await self._create(human, approval_id, create, values)

    async def _create(
        self, human: Human, approval_id: str, create: Any, values: dict[str, str]
    ) -> Response:
        """CreateGrant once the approval was approved; a refusal is shown beside it."""
        inbox = self.inbox
        try:
            reply = await inbox.client.create_grant(create, human=human.actor)
        except grpc.aio.AioRpcError as exc:
            log.warning("inbox: CreateGrant failed: %s", exc.code().name)
            refused = {
                "code": "UNAVAILABLE",
                "message": f"the gateway did not answer ({exc.code().name}); no grant was made",
            }
            return inbox.detail(human, approval_id, status=502, grant=values, grant_refusal=refused)
        if reply.HasField("error"):
            refused = refusal_of(reply.error)
            return inbox.detail(
                human,
                approval_id,
                status=refused_status(refused),
                grant=values,
                grant_refusal=refused,
            )
        log.info(
            "inbox: %s created grant %s", caller_text(human.actor.id), caller_text(reply.grant.id)
        )
        return RedirectResponse(f"/grants/{segment(reply.grant.id)}", status_code=303)

    # -- the grants pages ------------------------------------------------------------------

    async def list_page(self, request: Request) -> Response:
        inbox = self.inbox
        human = await inbox.human(request)
        if human is None:
            return inbox.sign_in_first(request)
        filters = GrantFilters.parse(request.query_params)
        token = request.query_params.get("page", "")[:500]
        try:
            reply = await inbox.client.list_grants(
                filters.statuses(),
                capability_id=filters.capability,
                actor_id=filters.actor,
                page_size=PAGE_SIZE,
                page_token=token,
            )
        except grpc.aio.AioRpcError as exc:
            return inbox.gateway_down(human, "ListGrants", exc, "no grants can be listed")
        if reply.HasField("error"):
            error = refusal_of(reply.error)
            return inbox.error(human, 502, "Refused", f"{error['code']}: {error['message']}")
        auditors = inbox.settings.auditor_roles
        rows = [
            grantviews.row(g) for g in reply.grants if grantviews.visible(human.actor, g, auditors)
        ]
        return inbox.render(
            "grants.html",
            human,
            page="grants",
            still=True,
            rows=rows,
            filters=filters,
            statuses=grantviews.STATUSES,
            next_page=reply.next_page_token,
            title="Grants",
        )

    async def show_page(self, request: Request) -> Response:
        human = await self.inbox.human(request)
        if human is None:
            return self.inbox.sign_in_first(request)
        return await self._show(human, request.path_params["grant_id"])

    async def _show(
        self,
        human: Human,
        grant_id: str,
        *,
        status: int = 200,
        error: dict[str, str] | None = None,
        note: str = "",
    ) -> Response:
        inbox = self.inbox
        try:
            reply = await inbox.client.get_grant(grant_id)
        except grpc.aio.AioRpcError as exc:
            return inbox.gateway_down(human, "GetGrant", exc, "the grant cannot be shown")
        found = not reply.HasField("error") and reply.grant.id
        if not found or not grantviews.visible(
            human.actor, reply.grant, inbox.settings.auditor_roles
        ):
            if error is not None:
                return inbox.error(human, status, "Refused", f"{error['code']}: {error['message']}")
            return inbox.error(human, 404, "Not found", "No such grant, or not one you may see.")
        approval = inbox.book.get(reply.grant.from_approval_id)
        return inbox.render(
            "grant.html",
            human,
            status,
            page="grants",
            still=True,
            g=grantviews.row(reply.grant),
            may_revoke=grantviews.may_revoke(human.actor, reply.grant),
            approval_status=_status(approval) if approval is not None else "",
            error=error,
            note=note,
            title=f"Grant {grant_id}",
        )

    async def revoke(self, request: Request) -> Response:
        inbox = self.inbox
        checked = await inbox.checked_form(request, "revoke")
        if isinstance(checked, Response):
            return checked
        human, form = checked
        grant_id, note = request.path_params["grant_id"], form.get("note", "")[:MAX_NOTE]
        try:
            reply = await inbox.client.revoke_grant(grant_id, note=note, human=human.actor)
        except grpc.aio.AioRpcError as exc:
            return inbox.gateway_down(human, "RevokeGrant", exc, "nothing was revoked")
        if reply.HasField("error"):
            error = refusal_of(reply.error)
            return await self._show(
                human, grant_id, status=refused_status(error), error=error, note=note
            )
        log.info("inbox: %s revoked grant %s", caller_text(human.actor.id), caller_text(grant_id))
        return RedirectResponse(f"/grants/{segment(grant_id)}", status_code=303)


def _status(approval: types_pb2.Approval) -> str:
    return (
        str(types_pb2.ApprovalStatus.Name(approval.status)).removeprefix("APPROVAL_STATUS_").lower()
    )
