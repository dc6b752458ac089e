"""Strict JSON parsing and the size limits (DESIGN §12), on the function the pipeline uses
before stage 5 and on upstream outputs: each limit refuses at one over and passes at the limit,
whether the text is short enough to bound every string (the fast path) or not."""

from __future__ import annotations

import orjson
import pytest

from gateway.errors import CapabilityError, Code
from gateway.model import Limits
from gateway.values.jsonvalue import parse_json, scan

SMALL = Limits(max_bytes=4096, max_depth=4, max_list_length=3, max_string_length=8)


def _refused(raw: bytes, limits: Limits = SMALL) -> CapabilityError:
    with pytest.raises(CapabilityError) as err:
        parse_json(raw, limits)
    return err.value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"s": "x" * 9}, "a string longer than 8"),
        ({"k" * 9: 1}, "a key longer than 8 characters"),
        ({"l": [1, 2, 3, 4]}, "a list longer than 3"),
        ({"a": {"b": {"c": {"d": {}}}}}, "nesting deeper than 4"),
        (["x" * 9], "a string longer than 8"),
        ("x" * 9, "a string longer than 8"),
    ],
)
def test_one_over_each_limit_is_input_too_large(value: object, message: str) -> None:
    err = _refused(orjson.dumps(value))
    assert err.code is Code.INPUT_TOO_LARGE
    assert err.reason == message
    # With padding the text is longer than the string limit: the full check runs, same answer.
    padded = orjson.dumps({"pad": [" " * 8] * 3, "v": value})
    deeper = Limits(max_bytes=4096, max_depth=5, max_list_length=3, max_string_length=8)
    assert _refused(padded, deeper).reason == message.replace("deeper than 4", "deeper than 5")


@pytest.mark.parametrize(
    "value",
    [
        {"s": "x" * 8, "k" * 8: [1, 2, 3]},
        {"a": {"b": {"c": {}}}},
        ["é" * 8],  # characters, not bytes: 16 bytes of UTF-8 are 8 characters
    ],
)
def test_at_each_limit_the_value_passes(value: object) -> None:
    assert parse_json(orjson.dumps(value), SMALL) == value


def test_the_byte_limit_and_the_strict_parser() -> None:
    assert _refused(b"[" + b"1," * 3000 + b"1]").code is Code.INPUT_TOO_LARGE
    assert _refused(b'{"a": 1, "a": 2}').reason == "duplicate object key"
    assert _refused(b"[NaN]").code is Code.INPUT_INVALID
    assert _refused(b"[18446744073709551616]").reason == "integer outside the 64-bit range"
    assert parse_json(b"  ", SMALL) == {}


def test_outputs_are_scanned_without_the_text_length_shortcut() -> None:
    # An upstream output is scanned as a parsed value: strings are always measured.
    with pytest.raises(CapabilityError) as err:
        scan({"s": "x" * 9}, SMALL)
    assert err.value.reason == "a string longer than 8"
    assert scan({"s": "x" * 8, "n": 2**70 * 1.0}, SMALL) == (2, True)
