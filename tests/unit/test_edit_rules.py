"""Approve with edits, the pure parts (ADR 0040): which requirement an edit may carry
(`transport/admin/edits._check_covered`), the patch every view shows (`convert.shown_patch`:
never a value in clear that a rule hides, every value hidden once the rules are gone) and the
MCP shapes of an edited approval and result."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from capgate.v1 import gateway_pb2
from gateway.errors import CapabilityError, Code
from gateway.model import Actor, RedactRule
from gateway.pipeline.edits import GovernedEdit
from gateway.pipeline.stages.approval import GateRequirement
from gateway.state.approvals.convert import shown_patch, to_proto
from gateway.state.approvals.records import ApprovalRecord
from gateway.transport.admin.edits import NOT_COVERED, _check_covered
from gateway.transport.mcp import tools
from gateway.values.redact import Redactor

BOB = Actor(id="bob", issuer="iss", kind="user", roles=("manager",))


def _record(**fields: Any) -> ApprovalRecord:
    base: dict[str, Any] = {
        "id": "apr_1",
        "capability_id": "refund",
        "capability_digest": "d",
        "surface": "agent",
        "requester": Actor(id="agent", issuer="iss", kind="agent"),
        "input": {"amount": 40, "reason": "new words"},
        "input_hash": "h2",
        "created_at": 1.0,
        "expires_at": 2.0,
        "approver_roles": ("manager",),
        "edited": True,
        "original_input": {"amount": 50, "reason": "old words"},
        "original_input_hash": "h1",
    }
    return ApprovalRecord(**{**base, **fields})


def _edit(
    roles: tuple[str, ...] = ("manager",), quorum: int = 1, distinct: tuple[str, ...] = ()
) -> GovernedEdit:
    need = GateRequirement(
        reasons=("r",),
        roles=roles,
        expires_in_s=60.0,
        message="m",
        grantable=True,
        quorum=quorum,
        distinct_roles=distinct,
        escalate_after_s=None,
        escalation_roles=(),
    )
    return GovernedEdit(input={}, input_hash="h3", requirement=need)


@pytest.mark.parametrize(
    ("edit", "record", "approver"),
    [
        (_edit(roles=("finance", "manager")), _record(), BOB),  # a role the approver lacks
        (_edit(quorum=2), _record(), BOB),  # more approvers than the record collects
        (_edit(quorum=2, distinct=("risk",)), _record(quorum=2), BOB),  # other distinct roles
        (  # with a quorum, a role the other approvers are not asked for
            _edit(roles=("finance", "manager"), quorum=2),
            _record(quorum=2),
            Actor(id="fay", issuer="iss", kind="user", roles=("finance", "manager")),
        ),
    ],
    ids=["role", "quorum", "distinct-roles", "quorum-role"],
)
def test_an_edit_needing_more_than_the_record_is_forbidden(
    edit: GovernedEdit, record: ApprovalRecord, approver: Actor
) -> None:
    with pytest.raises(CapabilityError) as raised:
        _check_covered(edit, record, approver)
    assert raised.value.code is Code.FORBIDDEN and raised.value.public_message == NOT_COVERED


def test_an_edit_within_the_record_or_needing_no_approval_is_covered() -> None:
    fay = Actor(id="fay", issuer="iss", kind="user", roles=("finance", "manager"))
    _check_covered(_edit(roles=("finance", "manager")), _record(), fay)  # one approver holds all
    _check_covered(_edit(quorum=2), _record(quorum=2), BOB)
    _check_covered(GovernedEdit(input={}, input_hash="h3", requirement=None), _record(), BOB)


def test_the_patch_hides_what_the_rules_hide_and_everything_without_them() -> None:
    record = _record()
    masked = Redactor((RedactRule(path="$.reason", action="mask"),))
    shown = shown_patch(record, masked)
    assert "new words" not in shown and "old words" not in shown and "/reason" in shown
    gone = orjson.loads(shown_patch(record, None))  # the capability left the config
    assert gone == [
        {"op": "replace", "path": "/amount", "value": "REDACTED"},
        {"op": "replace", "path": "/reason", "value": "REDACTED"},
    ]
    assert shown_patch(_record(edited=False), masked) == ""
    view = to_proto(record, include_input=False, redactor=masked)  # the requester's
    assert view.edited and view.patch_json == shown and not view.input_json


def test_mcp_says_an_approval_and_a_result_were_edited() -> None:
    patch = '[{"op":"replace","path":"/amount","value":40}]'
    view = to_proto(_record(), include_input=False, redactor=Redactor(()))
    status = tools.approval_result(view, {}, status_tool=True, requested=False)
    assert status["structuredContent"]["edited"] is True
    assert status["structuredContent"]["patch"] == orjson.loads(view.patch_json)
    result = gateway_pb2.ExecutionResult(execution_id="e", edited=True, patch_json=patch)
    result.completed.output_json = '{"amount": 40}'
    shaped = tools.call_result(result, status_tool=True)
    assert shaped["structuredContent"] == {"amount": 40}  # the output as it is
    assert shaped["_meta"]["dev.capgate/edited"] is True
    assert shaped["_meta"]["dev.capgate/patch"] == orjson.loads(patch)
    assert len(shaped["content"]) == 2 and patch in shaped["content"][1]["text"]
    plain = gateway_pb2.ExecutionResult(execution_id="e")
    plain.completed.output_json = "{}"
    assert len(tools.call_result(plain, status_tool=True)["content"]) == 1
