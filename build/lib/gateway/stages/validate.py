"""Stage 5 — input validation (SI-6): limits first, then the schema; later stages see only the
validated, defaulted value. Issue messages never contain values."""

from __future__ import annotations

from gateway.call import Call, Runtime
from gateway.errors import CapabilityError, Code, InputIssue
from gateway.jsonvalue import parse_json

_NOT_OBJECT = (InputIssue("$", "must be a JSON object"),)


async def validate_input(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    prepared = call.prepared
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
