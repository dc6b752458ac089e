"""The approval-hash golden vectors (tests/vectors/approval_hash): the gateway's input path
(strict JSON parse, then RFC 8785 canonical form and SHA-256) gives every case its bytes and
hash, and refuses every refused text. The same file is for any other implementation."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gateway.errors import CapabilityError, Code
from gateway.model import Limits
from gateway.values.canonical import canonical_json, input_hash
from gateway.values.jsonvalue import parse_json

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors" / "approval_hash"
DOC: dict[str, Any] = json.loads((VECTORS_DIR / "vectors.json").read_text(encoding="utf-8"))
CASES = DOC["cases"]
LIMITS = Limits()


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "approval_hash_vectors", VECTORS_DIR / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    # The hash is defined for every JSON text; U+0000 is refused at the gateway's door only
    # (callers' input: jsonvalue.py), so the vectors are read as the hash sees them.
    value = parse_json(case["input"].encode("utf-8"), LIMITS, allow_nul=True)
    assert canonical_json(value) == case["canonical"].encode("utf-8")
    assert input_hash(value) == case["sha256"]


@pytest.mark.parametrize("case", DOC["refused"], ids=[c["name"] for c in DOC["refused"]])
def test_refused_texts_never_get_a_hash(case: dict[str, Any]) -> None:
    with pytest.raises(CapabilityError):
        input_hash(parse_json(case["input"].encode("utf-8"), LIMITS))


@pytest.mark.parametrize("case", [c for c in CASES if "ieee754" in c], ids=lambda c: c["name"])
def test_the_same_double_from_its_bits(case: dict[str, Any]) -> None:
    """What an implementation that builds the double from its IEEE 754 bits must produce."""
    value = struct.unpack(">d", bytes.fromhex(case["ieee754"]))[0]
    assert canonical_json(value).decode() == case["canonical"]


def test_the_groups_cover_numbers_unicode_nesting_and_the_rfc_examples() -> None:
    names = {c["name"] for c in CASES}
    assert {"rfc8785_3_2_2_sample", "rfc8785_3_2_3_sorting", "keys_utf16_not_code_points"} <= names
    assert sum(name.startswith("rfc8785_b_") for name in names) == 24  # all of Appendix B
    assert {c["group"] for c in CASES} == {"number", "exact_integer", "structure"}
    assert len({c["sha256"] for c in CASES}) < len(CASES)  # equal values share their hash


def test_vectors_file_is_what_the_generator_produces() -> None:
    assert (VECTORS_DIR / "vectors.json").read_text(encoding="utf-8") == _generator().render()


@pytest.mark.parametrize("value", ["\ud800", {"\udc00": 1}, ["a", "\ud83d"]])
def test_a_lone_surrogate_that_got_past_the_parser_has_no_hash(value: Any) -> None:
    """Defence in depth: a value built elsewhere than the strict parser (it refuses these)."""
    with pytest.raises(CapabilityError) as refused:
        input_hash(value)
    assert refused.value.code is Code.APPROVAL_UNSERIALIZABLE_INPUT
