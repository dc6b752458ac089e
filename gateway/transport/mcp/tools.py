"""MCP shapes of capgate's contract: descriptors become tools, envelopes become tool results.

Results (DESIGN §12, ADR 0010):
- completed: the redacted output as JSON text, and as `structuredContent` when it is an object;
- approval required: a non-error result saying the call did not run, with the approval id and
  expiry, so the model can tell the user and later check it with `capgate_approval_status`;
- governed failures: `isError: true`, the public message, `structuredContent {code, stage,
  retryable, execution_state}` (plus `issues` for INPUT_INVALID, which never carry values, and
  `retry_after_s` for RATE_LIMITED, also said in the text);
- an approver's edit (ADR 0040): the approval status says `edited` with the RFC 6902 `patch`
  (after `redact.approval_input`); a resumed call that ran the edited input says so in its text
  and in `_meta` (`dev.capgate/edited`, `dev.capgate/patch`), its output left as it is;
- a quorum of approvers: the approval status says `quorum` and `approvals_received` ("1 of 2"
  in the text while pending);
- CAPABILITY_NOT_FOUND is not a result: the caller gets the same -32602 as for an unknown tool
  (SI-8), which `call_result` signals by raising `UNKNOWN_TOOL`.
No tool declares an `outputSchema`: an approval-required result could not conform to it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from capgate.v1 import gateway_pb2, types_pb2
from gateway.config.mcpnames import APPROVAL_TOOL
from gateway.model import Capability
from gateway.transport.mcp.jsonrpc import UNKNOWN_TOOL

META: Final = "dev.capgate/"  # our `_meta` key prefix (reverse-DNS, as the spec asks)
_NOT_FOUND: Final = types_pb2.ERROR_CODE_CAPABILITY_NOT_FOUND


def tool_annotations(side_effect: str, idempotent: bool) -> dict[str, Any]:
    """MCP tool hints from the declared side effect (hints only: governance never trusts them)."""
    if side_effect in ("none", "read"):
        return {"readOnlyHint": True, "openWorldHint": side_effect == "read"}
    return {
        "readOnlyHint": False,
        "destructiveHint": side_effect == "destructive",
        "idempotentHint": idempotent,
        "openWorldHint": True,
    }


def input_schema(schema_json: str) -> dict[str, Any] | None:
    """The tool's `inputSchema`: an object schema (MCP requires `type: object`); None when the
    capability's input is declared as something else, which no MCP call could satisfy."""
    schema = orjson.loads(schema_json) if schema_json else {}
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type", "object")
    if kind != "object":
        return None
    return {"type": "object", **schema}


def static_tool(name: str, capability: Capability, schema: dict[str, Any]) -> dict[str, Any]:
    """The parts of a tool that depend only on the snapshot (built once per revision)."""
    return {
        "name": name,
        "title": capability.id,
        "inputSchema": schema,
        "annotations": tool_annotations(capability.side_effect, capability.idempotent),
    }


def tool(static: dict[str, Any], descriptor: gateway_pb2.CapabilityDescriptor) -> dict[str, Any]:
    """One tools/list entry: the static part plus what discovery decided for this actor."""
    description = descriptor.description
    if descriptor.requires_approval:
        description += (
            "\n\nCalls may need human approval: the result then says the call has not run and "
            "gives an approval id."
        )
    return {
        **static,
        "description": description,
        "_meta": {
            META + "capabilityId": descriptor.id,
            META + "risk": descriptor.risk,
            META + "sideEffect": descriptor.side_effect,
            META + "requiresApproval": descriptor.requires_approval,
            META + "tags": list(descriptor.tags),
        },
    }


APPROVAL_STATUS_TOOL: Final[dict[str, Any]] = {
    "name": APPROVAL_TOOL,
    "title": "Approval status",
    "description": (
        "Check an approval that a previous tool call asked for, and run the approved call. "
        "Pass the approval_id from that result. While the approval is pending this says so; "
        "once an approver has approved it, the call runs (at most once) and its result is "
        "returned. With resume=false it only reports the status. Approvals are decided by "
        "people outside this conversation; no tool can approve or reject one."
    ),
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["approval_id"],
        "properties": {
            "approval_id": {"type": "string", "minLength": 1, "maxLength": 128},
            "resume": {"type": "boolean", "default": True},
        },
    },
    # It may run the approved call, whatever that call does; running it twice has no effect
    # (an approval executes at most once, SI-12).
    "annotations": {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": True,
    },
}


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _state(value: int) -> str:
    return str(types_pb2.ExecutionState.Name(value)).removeprefix("EXECUTION_STATE_")


def error_result(err: types_pb2.CapabilityError, meta: dict[str, Any]) -> dict[str, Any]:
    """A governed failure the model should see (seed 002: denied, not lost)."""
    structured: dict[str, Any] = {
        "code": types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_"),
        "stage": err.stage,
        "retryable": err.retryable,
        "execution_state": _state(err.execution_state),
    }
    text = err.message
    if err.issues:
        structured["issues"] = [{"path": i.path, "message": i.message} for i in err.issues]
        text += "".join(f"\n- {i.path}: {i.message}" for i in err.issues)
    if err.HasField("retry_after"):
        seconds = err.retry_after.ToNanoseconds() / 1e9
        structured["retry_after_s"] = seconds
        text += f" Retry after {seconds:g}s."
    return {"content": _text(text), "structuredContent": structured, "isError": True, "_meta": meta}


def approval_result(
    approval: types_pb2.Approval, meta: dict[str, Any], *, status_tool: bool, requested: bool
) -> dict[str, Any]:
    """Not an error: the call awaits a person (`requested`: this call just asked for it), or
    the status of an approval the caller asked about."""
    expires = approval.expires_at.ToJsonString()
    status = types_pb2.ApprovalStatus.Name(approval.status).removeprefix("APPROVAL_STATUS_").lower()
    if status == "pending":
        text = (
            f"The call has not run: it needs human approval first. Approval id: {approval.id} "
            f"(expires {expires})."
        )
        if approval.message:
            text += f" {approval.message}"
        if status_tool:
            text += (
                f" Tell the user; once an approver has decided, call {APPROVAL_TOOL} with this "
                "approval_id to run the approved call."
            )
    else:
        text = f"Approval {approval.id} is {status}."
    structured: dict[str, Any] = {
        "status": "approval_required" if requested else status,
        "approval_id": approval.id,
        "expires_at": expires,
        "reasons": list(approval.reasons),
    }
    if approval.message:
        structured["message"] = approval.message
    if approval.quorum > 1:  # several approvers sign (docs/approvals.md, Quorum)
        structured["quorum"] = approval.quorum
        structured["approvals_received"] = approval.approvals_received
        if status == "pending":
            text += f" Approvals: {approval.approvals_received} of {approval.quorum}."
    if approval.edited:
        structured["edited"] = True
        structured["patch"] = orjson.loads(approval.patch_json or "[]")
        text += f" {_EDITED} {approval.patch_json}"
    return {
        "content": _text(text),
        "structuredContent": structured,
        "isError": False,
        "_meta": meta,
    }


def call_result(
    result: gateway_pb2.ExecutionResult, *, status_tool: bool, conceal_not_found: bool = True
) -> dict[str, Any]:
    """The CallToolResult of an envelope. A not-found raises UNKNOWN_TOOL (SI-8) unless the
    call came through the approval tool, which exists whatever became of the capability."""
    meta: dict[str, Any] = {META + "executionId": result.execution_id}
    if result.grant_id:  # a standing grant stood in for the approval (ADR 0038)
        meta[META + "grantId"] = result.grant_id
    edited = _edited(result, meta)
    kind = result.WhichOneof("outcome")
    if kind == "completed":
        text = result.completed.output_json
        out: dict[str, Any] = {"content": _text(text) + edited, "isError": False, "_meta": meta}
        value = orjson.loads(text) if text else None
        if isinstance(value, dict):
            out["structuredContent"] = value
        return out
    if kind == "approval_required":
        return approval_result(
            result.approval_required.approval, meta, status_tool=status_tool, requested=True
        )
    err = result.failed if kind == "failed" else result.cancelled
    if err.code == _NOT_FOUND and conceal_not_found:
        raise UNKNOWN_TOOL
    failed = error_result(err, meta)
    failed["content"] += edited
    return failed


_EDITED: Final = "An approver edited the input before approving it (RFC 6902 patch):"


def _edited(result: gateway_pb2.ExecutionResult, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """A resumed call that ran an approver's edited input says so (ADR 0040): `_meta` carries
    `edited` and the patch, and a text item tells the model what ran."""
    if not result.edited:
        return []
    meta[META + "edited"] = True
    meta[META + "patch"] = orjson.loads(result.patch_json or "[]")
    return _text(f"{_EDITED} {result.patch_json}")
