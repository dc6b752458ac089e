"""The contract: the error table is exhaustive and matches the proto enum; the stage order is
seed 001's; docs/errors.md is generated from the table."""

from __future__ import annotations

import re
from pathlib import Path

from capgate.v1 import types_pb2
from gateway import errordocs, pipeline
from gateway.errors import TABLE, Code, Event, Kind

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT.parent / "shared" / "seeds" / "001_28e8200fcc6ac1b0.txt"

SEED_CODES = {
    "CAPABILITY_NOT_FOUND",
    "INPUT_INVALID",
    "UNAUTHENTICATED",
    "POLICY_DENIED",
    "POLICY_FAILED",
    "APPROVAL_UNSERIALIZABLE_INPUT",
    "AUDIT_UNAVAILABLE",
    "EXECUTION_FAILED",
    "FORBIDDEN",
    "TIMEOUT",
    "CANCELLED",
    "OUTPUT_INVALID",
    "APPROVAL_PENDING",
    "APPROVAL_REJECTED",
    "APPROVAL_EXPIRED",
    "APPROVAL_CONSUMED",
    "APPROVAL_INPUT_MISMATCH",
    "APPROVAL_SELF_APPROVAL",
}
DESIGN_ADDITIONS = {
    "APPROVAL_UNAVAILABLE",
    "APPROVAL_NOT_FOUND",
    "IDEMPOTENCY_CONFLICT",
    "IDEMPOTENCY_IN_PROGRESS",
    "INPUT_TOO_LARGE",
    "UPSTREAM_UNAVAILABLE",
}


def test_every_seed_and_design_code_is_in_the_proto_enum_and_the_table() -> None:
    names = types_pb2.ErrorCode.keys()
    proto = {n.removeprefix("ERROR_CODE_") for n in names} - {"UNSPECIFIED"}
    assert proto >= SEED_CODES | DESIGN_ADDITIONS
    assert proto == {c.value for c in Code} == {c.value for c in TABLE}


def test_seed_codes_appear_in_the_seed_text() -> None:
    if SEED.exists():  # the seed lives beside the project in this workplace
        text = SEED.read_text()
        for code in SEED_CODES:
            assert code in text, code


def test_terminal_events_follow_design_section_12() -> None:
    denied = {Code.CAPABILITY_NOT_FOUND, Code.POLICY_DENIED, Code.POLICY_FAILED}
    cancelled = {Code.TIMEOUT, Code.CANCELLED}
    for code, spec in TABLE.items():
        if code in denied:
            assert spec.event is Event.DENIED, code
        elif code in cancelled:
            assert spec.event is Event.CANCELLED and spec.kind is Kind.CANCELLED, code
        else:
            assert spec.event is Event.FAILED and spec.kind is Kind.FAILED, code


def test_unexpected_errors_reach_callers_only_as_the_generic_message() -> None:
    assert TABLE[Code.EXECUTION_FAILED].message == "The operation failed."
    assert not TABLE[Code.EXECUTION_FAILED].expose_to_model


def test_invocation_stage_order_is_seed_001() -> None:
    numbers = [s.number for s in pipeline.INVOKE]
    assert numbers == list(range(2, 14))
    names = [s.name for s in pipeline.INVOKE]
    assert names == [
        "execution-identity",
        "resolve",
        "exposure",
        "input-validation",
        "actor-check",
        "invocation-policies",
        "approval-gate",
        "execution-policies",
        "controls",
        "procedure-invocation",
        "output-validation",
        "redaction",
    ]
    if SEED.exists():
        seed_numbers = [int(m) for m in re.findall(r"^\s*(\d+)\. ", SEED.read_text(), re.M)][:15]
        assert seed_numbers[:15] == list(range(1, 16))


def test_resume_re_enters_at_the_approval_gate_and_continues_at_stage_9() -> None:
    numbers = [s.number for s in pipeline.RESUME]
    assert numbers[:2] == [2, 8]
    assert numbers[-5:] == [9, 10, 11, 12, 13]
    assert pipeline.RESUME[-5:] == pipeline.INVOKE[-5:]


def test_error_docs_are_generated_from_the_table() -> None:
    assert (ROOT / "docs" / "errors.md").read_text() == errordocs.render()
