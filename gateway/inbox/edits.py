"""Approve with edits in the inbox: the edit form's preview (a diff of the change) and the
approval of the edited input.

The form holds the input as the page showed it (after the capability's `redact.approval_input`
rules), as JSON text. "Show the change" renders the RFC 6902 operations from the shown input to
the typed one (`gateway.values.jsonpatch.diff`) without asking the gateway anything — the same
patch the gateway applies to the real input, hidden values kept (docs/approvals.md "Edits");
"Approve with these edits" sends DecideApproval with `edited_input_json` and the input hash the
page showed. The gateway validates and governs the edited input and refuses what it must (its
message shown as is); it also refuses edits of capabilities not marked `approval.editable`,
which the inbox cannot read from its own config: such a refusal hides the form for that
capability for `FORGET_S`, and an edited approval shows it again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Final

import grpc
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gateway.audit.events import caller_text
from gateway.inbox import views
from gateway.inbox.grantpages import Pages, refusal_of, refused_status
from gateway.inbox.web import segment
from gateway.values.jsonpatch import diff

log = logging.getLogger("capgate.inbox")
MAX_NOTE: Final = 1000
FORGET_S: Final = 300.0
MAX_REMEMBERED: Final = 1000


class Editability:
    """What the inbox learned of capabilities' `approval.editable`: a refusal naming it says
    no, an edited approval says yes; forgotten after `FORGET_S` (a config reload may change
    it). Unknown capabilities are offered the form."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._known: dict[str, tuple[bool, float]] = {}

    def learn(self, capability_id: str, editable: bool) -> None:
        if len(self._known) >= MAX_REMEMBERED and capability_id not in self._known:
            self._known.pop(next(iter(self._known)))
        self._known[capability_id] = (editable, self._clock())

    def offered(self, capability_id: str) -> bool:
        found = self._known.get(capability_id)
        if found is None or self._clock() - found[1] > FORGET_S:
            return True
        return found[0]


def not_editable(error: dict[str, str]) -> bool:
    """Whether the gateway refused the edit because the capability takes none."""
    return error["code"] == "FORBIDDEN" and "cannot be edited" in error["message"]


def _problem(exc: json.JSONDecodeError) -> str:
    return f"The edited input is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."


class EditPages:
    def __init__(self, inbox: Pages, editability: Editability) -> None:
        self.inbox = inbox
        self.editability = editability

    async def edit(self, request: Request) -> Response:
        inbox = self.inbox
        checked = await inbox.checked_form(request)
        if isinstance(checked, Response):
            return checked
        human, form = checked
        approval_id = request.path_params["approval_id"]
        text, note = form.get("edited_input", ""), form.get("note", "")[:MAX_NOTE]
        state: dict[str, Any] = {"text": text, "open": True}
        approval = inbox.book.get(approval_id)
        try:
            edited = json.loads(text)
        except json.JSONDecodeError as exc:
            return inbox.detail(
                human, approval_id, status=400, note=note, edit=state | {"problem": _problem(exc)}
            )
        before = views.parsed_input(approval.input_json) if approval is not None else None
        state["changes"] = views.changes(diff(before, edited), before)
        if not state["changes"]:
            state["problem"] = "Nothing was changed: approve without edits instead."
            return inbox.detail(human, approval_id, status=400, note=note, edit=state)
        if form.get("action") != "approve":  # a preview: nothing is sent
            return inbox.detail(human, approval_id, note=note, edit=state)
        try:
            reply = await inbox.client.decide(
                approval_id,
                approve=True,
                note=note,
                input_hash=form.get("input_hash", ""),
                human=human.actor,
                edited_input_json=text.encode(),
            )
        except grpc.aio.AioRpcError as exc:
            return inbox.gateway_down(human, "DecideApproval", exc, "nothing was decided")
        if reply.HasField("error"):
            error = refusal_of(reply.error)
            if approval is not None and not_editable(error):
                self.editability.learn(approval.capability_id, editable=False)
            return inbox.detail(
                human,
                approval_id,
                status=refused_status(error),
                error=error,
                note=note,
                edit=state,
            )
        inbox.book.merge(reply.approval)
        self.editability.learn(reply.approval.capability_id, editable=True)
        log.info(
            "inbox: %s approve approval %s with edits",
            caller_text(human.actor.id),
            caller_text(approval_id),
        )
        return RedirectResponse(f"/approvals/{segment(approval_id)}", status_code=303)
