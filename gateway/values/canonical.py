"""Canonical JSON (RFC 8785, JCS) and the input hash that binds approvals (SI-5).

Keys are sorted by UTF-16 code units, strings use JSON's minimal escaping, finite floats use
ECMAScript's shortest round-trip form. Integers are written exactly (the JSON parser already
refused anything outside the signed/unsigned 64-bit range, DESIGN §12); for |n| <= 2**53 that
is what JCS prescribes, and beyond it exactness is kept on purpose so that two different
integers never share an approval hash (ADR 0006).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from gateway.errors import CapabilityError, Code

_encode_str = json.JSONEncoder(ensure_ascii=False).encode


class UnserializableInput(ValueError):
    """A value with no canonical JSON form (NaN, Infinity, non-JSON types)."""


def _utf16_key(key: str) -> bytes:
    # surrogatepass: a lone surrogate sorts by its code unit, and is refused when written.
    return key.encode("utf-16-be", "surrogatepass")


def _number(value: float) -> str:
    if not math.isfinite(value):
        raise UnserializableInput("NaN and Infinity have no JSON form")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    text = repr(value)  # shortest round-trip digits, Python's spelling
    mantissa, _, exp_text = text.partition("e")
    if not exp_text:
        # Plain decimal, 1e-4 <= |v| < 1e16 in repr's own rule. Doubles from 2**53 up are all
        # integers, which repr spells "9007199254740992.0" and ECMAScript "9007199254740992".
        return text.removesuffix(".0")
    exponent = int(exp_text)
    digits = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    point = exponent + 1  # ECMAScript's n: position of the decimal point after first digit
    if len(digits) <= point <= 21:
        return sign + digits + "0" * (point - len(digits))
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    exp = point - 1
    body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{body}e{'+' if exp > 0 else '-'}{abs(exp)}"


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_encode_str(value))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in sorted(value, key=_utf16_key):
            if not isinstance(key, str):
                raise UnserializableInput("object keys must be strings")
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise UnserializableInput(f"values of type {type(value).__name__} have no JSON form")


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value; raises UnserializableInput."""
    out: list[str] = []
    _write(value, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the strict JSON parser never makes one
        raise UnserializableInput("a string is not valid Unicode") from None


def input_hash(value: Any) -> str:
    """Hex SHA-256 of the canonical JSON of the validated input (stage 8, SI-5).

    Raises CapabilityError(APPROVAL_UNSERIALIZABLE_INPUT) when the value has no canonical form.
    """
    try:
        return hashlib.sha256(canonical_json(value)).hexdigest()
    except (UnserializableInput, RecursionError) as exc:
        raise CapabilityError(Code.APPROVAL_UNSERIALIZABLE_INPUT, reason=str(exc)) from None
