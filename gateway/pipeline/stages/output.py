"""Stages 12-13 — output validation, then redaction (SI-10).

An output that violates its own contract is withheld (OUTPUT_INVALID, executed before
failure). Redaction runs on the validated output, before any serialization, log or span."""

from __future__ import annotations

from gateway.errors import CapabilityError, Code
from gateway.pipeline.call import Call, Runtime
from gateway.values.jsonvalue import scan


async def validate_output(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    try:
        scan(call.output, call.prepared.capability.limits)
    except CapabilityError:
        raise CapabilityError(
            Code.OUTPUT_INVALID, executed=True, reason="output over limits"
        ) from None
    validator = call.prepared.output_validator
    if validator is None:
        return
    validated, issues = validator.validate(call.output)
    if issues:
        raise CapabilityError(
            Code.OUTPUT_INVALID, executed=True, reason=f"output schema: {len(issues)} issue(s)"
        )
    call.output = validated


async def redact_output(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    prepared = call.prepared
    output = prepared.redact_output(call.output)
    if prepared.output_expr is not None and call.actor is not None:
        output = prepared.output_expr.apply(
            output, actor=call.actor.as_policy_value(), capability=prepared.policy_value
        )
    call.output = output
