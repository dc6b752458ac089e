"""The contract: the error table is exhaustive and matches the proto enum; the stage order is
seed 001's; docs/errors.md is generated from the table."""

from __future__ import annotations

import re
from pathlib import Path

from capgate.v1 import types_pb2
from gateway.cli import errordocs
from gateway.errors import TABLE, Code, Event, Kind
from gateway.pipeline import runner as pipeline

ROOT = Path(__file__).resolve().parents[2]
# The lines of seed 001 these tests check, copied with their provenance (the seed itself lives
# outside the repository): line number -> text.
EXCERPT = Path(__file__).with_name("seed001_excerpt.txt")
SEED_SHA256 = "2148bfb48c4dd0a519b5d9fe4f873c7783469a67ae03bc52df48587a4075272a"


def seed_lines() -> dict[int, str]:
    lines: dict[int, str] = {}
    for row in EXCERPT.read_text().splitlines():
        if row.startswith("#"):
            continue
        number, _, text = row.partition("|")
        lines[int(number)] = text
    return lines


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


def test_the_seed_excerpt_names_its_source() -> None:
    header = [r for r in EXCERPT.read_text().splitlines() if r.startswith("#")]
    assert "# source: shared/seeds/001_28e8200fcc6ac1b0.txt (187 lines)" in header
    assert f"# sha256: {SEED_SHA256}" in header
    assert len(seed_lines()) == 24


def test_seed_codes_appear_in_the_seed_text() -> None:
    text = "\n".join(seed_lines().values())
    named = set(re.findall(r"\b[A-Z][A-Z_]{4,}\b", text))
    for code in SEED_CODES:
        assert code in named, code


def test_terminal_events_follow_design_section_12() -> None:
    denied = {Code.CAPABILITY_NOT_FOUND, Code.POLICY_DENIED, Code.POLICY_FAILED}
    denied |= {Code.HOOK_DENIED, Code.HOOK_FAILED}  # governance hooks, as policies (ADR 0027)
    denied.add(Code.RATE_LIMITED)  # limits: a governance refusal before anything ran (ADR 0022)
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
    # Stage 4 has two rows: exposure, then the input-free hide policies (ADR 0016).
    # The hook rows (ADR 0027): pre-hooks after 6, their asks merged after 7, post-hooks
    # after 12. The cache rows (ADR 0024): the lookup after 10, the store after 12. The limits
    # rows (ADR 0022): after the hook asks (7) and right after the approval gate (8). The
    # idempotency journal's early read (ADR 0034) right after the actor check (6).
    assert numbers == [2, 3, 4, 4, 5, 6, 6, 6, 7, 7, 7, 8, 8, 9, 10, 10, 11, 12, 12, 12, 13]
    names = [s.name for s in pipeline.INVOKE]
    assert names == [
        "execution-identity",
        "resolve",
        "exposure",
        "input-free-hide",
        "input-validation",
        "actor-check",
        "idempotency-replay",
        "pre-hooks",
        "invocation-policies",
        "hook-asks",
        "limits",
        "approval-gate",
        "limits-inline-approval",
        "execution-policies",
        "controls",
        "cache-lookup",
        "procedure-invocation",
        "output-validation",
        "cache-store",
        "post-hooks",
        "redaction",
    ]
    # The seed's table (its lines 11-26) numbers stages 1-15: the adapter (1) is the listener,
    # 14 and 15 (the completed event and the return) are the runner's; 2-13 are table rows.
    table = [seed_lines()[n] for n in range(11, 27)]
    seed_numbers = [int(m.group(1)) for t in table if (m := re.match(r"\s*(\d+)\. ", t))]
    assert seed_numbers == list(range(1, 16))
    assert sorted(set(numbers)) == seed_numbers[1:13]


def test_resume_re_enters_at_the_approval_gate_and_continues_at_stage_9() -> None:
    numbers = [s.number for s in pipeline.RESUME]
    assert numbers[:2] == [2, 8]
    # With the post-hooks (ADR 0027) and the cache rows, which do nothing on Resume (ADR 0024).
    assert numbers[-8:] == [9, 10, 10, 11, 12, 12, 12, 13]
    assert pipeline.RESUME[-8:] == pipeline.INVOKE[-8:]
    # Pre-hooks re-run on the stored input, before the policies are re-evaluated (ADR 0027).
    names = [s.name for s in pipeline.RESUME]
    assert (
        names.index("actor-check") < names.index("pre-hooks") < names.index("invocation-policies")
    )
    assert "hook-asks" not in names  # a resumed approval already satisfies any ask
    # A finished key answers before the approval is consumed (ADR 0034).
    assert names.index("idempotency-replay") < names.index("approval-consume")


def test_error_docs_are_generated_from_the_table() -> None:
    assert (ROOT / "docs" / "errors.md").read_text() == errordocs.render()
