"""Strict JSON input parsing and size limits, checked before stage 5 (DESIGN §12).

Refused: invalid UTF-8, invalid JSON, NaN/Infinity, duplicate object keys, integers outside the
64-bit range, and anything beyond the limits (bytes, depth, list length, string length). The
messages name the rule, never the offending value.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from gateway.errors import CapabilityError, Code, InputIssue
from gateway.model import Limits

# An unescaped closing quote followed by a colon ends an object key, and nothing else in JSON
# text can look like that: inside strings every quote is escaped. Counting these and comparing
# with the parsed key count detects duplicate keys in C speed (orjson keeps the last silently).
_KEY_END = re.compile(rb'(?<!\\)(?:\\\\)*"\s*:')
_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1


def _invalid(path: str, message: str) -> CapabilityError:
    return CapabilityError(Code.INPUT_INVALID, issues=(InputIssue(path, message),), reason=message)


def _too_large(message: str) -> CapabilityError:
    return CapabilityError(Code.INPUT_TOO_LARGE, reason=message)


def _walk(value: Any, limits: Limits, depth: int, path: str) -> tuple[int, bool]:
    """Returns (object keys seen, saw a float that may be an out-of-range integer)."""
    if depth > limits.max_depth:
        raise _too_large(f"nesting deeper than {limits.max_depth} at {path}")
    keys, suspicious = 0, False
    if isinstance(value, dict):
        keys += len(value)
        for k, v in value.items():
            if len(k) > limits.max_string_length:
                raise _too_large(f"key longer than {limits.max_string_length} characters at {path}")
            if isinstance(v, dict | list):
                n, s = _walk(v, limits, depth + 1, f"{path}.{k}")
                keys, suspicious = keys + n, suspicious or s
            elif isinstance(v, str):
                if len(v) > limits.max_string_length:
                    raise _too_large(f"string longer than {limits.max_string_length} at {path}.{k}")
            elif isinstance(v, float) and abs(v) >= 9.2e18:
                suspicious = True
    elif isinstance(value, list):
        if len(value) > limits.max_list_length:
            raise _too_large(f"list longer than {limits.max_list_length} at {path}")
        for i, v in enumerate(value):
            if isinstance(v, dict | list):
                n, s = _walk(v, limits, depth + 1, f"{path}[{i}]")
                keys, suspicious = keys + n, suspicious or s
            elif isinstance(v, str):
                if len(v) > limits.max_string_length:
                    raise _too_large(
                        f"string longer than {limits.max_string_length} at {path}[{i}]"
                    )
            elif isinstance(v, float) and abs(v) >= 9.2e18:
                suspicious = True
    elif isinstance(value, str) and len(value) > limits.max_string_length:
        raise _too_large(f"string longer than {limits.max_string_length}")
    elif isinstance(value, float) and abs(value) >= 9.2e18:
        suspicious = True
    return keys, suspicious


def _check_integer(text: str) -> int:
    n = int(text)
    if not _I64_MIN <= n <= _U64_MAX:
        raise _invalid("$", "integer outside the 64-bit range")
    return n


def parse_json(raw: bytes, limits: Limits, *, what: str = "input") -> Any:
    """Parse caller JSON under the limits; raises CapabilityError (INPUT_TOO_LARGE/INVALID)."""
    if len(raw) > limits.max_bytes:
        raise _too_large(f"{what} larger than {limits.max_bytes} bytes")
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        reason = "not valid UTF-8" if "UTF-8" in str(exc) else "not valid JSON"
        if "infinity" in str(exc):
            reason = "number out of range"
        raise _invalid("$", f"{what} is {reason}" if reason.startswith("not") else reason) from None
    keys, suspicious = _walk(value, limits, 1, "$")
    if keys and keys != len(_KEY_END.findall(raw)):
        raise _invalid("$", "duplicate object key")
    if suspicious:
        # Rare path: orjson turned an integer beyond 64 bits into a float. Re-parse exactly.
        json.loads(raw, parse_int=_check_integer)
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON of a validated value (what goes upstream and back to callers)."""
    return orjson.dumps(value)
