"""Stage 5 — input validation (SI-6): the request fields forwarded upstream as metadata, then
the input's limits, then its schema; later stages see only the validated, defaulted value. Issue
messages never contain values.

The request fields come first and on Resume too (it runs this stage before the approval is
consumed): a value gRPC metadata cannot carry would otherwise fail at stage 11, after the
idempotency key was claimed or the approval consumed, with nothing sent (issue 14)."""

from __future__ import annotations

from gateway.errors import CapabilityError, Code, InputIssue
from gateway.pipeline.call import Call, Runtime
from gateway.upstream.headers import forwarded_value_issues
from gateway.values.jsonvalue import parse_json

_NOT_OBJECT = (InputIssue("$", "must be a JSON object"),)


def check_request_fields(call: Call) -> None:
    """The caller-chosen values stage 11 sends as metadata (gateway/upstream/headers.py)."""
    issues = forwarded_value_issues(
        (("correlation_id", call.correlation_id), ("idempotency_key", call.idempotency_key))
    )
    if issues:
        names = " and ".join(issue.path for issue in issues)
        subject = f"field {names} is" if len(issues) == 1 else f"fields {names} are"
        raise CapabilityError(
            Code.INPUT_INVALID,
            message=f"The request {subject} invalid.",
            issues=issues,
            reason=f"request field {names} cannot be forwarded as metadata",
        )


async def validate_input(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    prepared = call.prepared
    check_request_fields(call)
    if call.approval is not None:
        # Resume: the stored input is re-validated against the current schema (seed 001).
        value = call.approval.input
    else:
        value = parse_json(call.raw_input, prepared.capability.limits)
    if not isinstance(value, dict):
        raise CapabilityError(Code.INPUT_INVALID, issues=_NOT_OBJECT, reason="not an object")
    validated, issues = prepared.input_validator.validate(value)
    if issues:
        raise CapabilityError(Code.INPUT_INVALID, issues=issues, reason="schema")
    call.input = validated
