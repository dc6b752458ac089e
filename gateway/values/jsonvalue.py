"""Strict JSON parsing and size limits, checked before stage 5 and on upstream replies
(DESIGN §12).

Refused: invalid UTF-8, invalid JSON, NaN/Infinity, duplicate object keys, integers outside the
64-bit range, U+0000 (NUL) in a caller's string or key, and anything beyond the limits (bytes,
depth, list length, string length). NUL is refused because the policy engine (cel-cpp through
cel-expr-python) reads a string only up to its first NUL: `input.cmd == 'ls'` would hold for
"ls\u0000; rm -rf /" while the upstream received all of it. The
messages name the rule, never the offending value. Upstream JSON (the Procedure contract's
`output_json`) meets the same rules through `parse_strict`; its limits are stage 12's.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Final

import orjson

from gateway.errors import CapabilityError, Code, InputIssue
from gateway.model import Limits

# An unescaped closing quote followed by a colon ends an object key, and nothing else in JSON
# text can look like that: inside strings every quote is escaped. Counting these and comparing
# with the parsed key count detects duplicate keys in C speed (orjson keeps the last silently).
_KEY_END = re.compile(rb'(?<!\\)(?:\\\\)*"\s*:')
_KEY_END_PLAIN = re.compile(rb'"\s*:')
_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1
# The rules without the limits: nothing is too large, too deep or too long.
_RULES_ONLY: Final = Limits(
    max_bytes=sys.maxsize,
    max_depth=sys.maxsize,
    max_list_length=sys.maxsize,
    max_string_length=sys.maxsize,
)


def _invalid(path: str, message: str) -> CapabilityError:
    return CapabilityError(Code.INPUT_INVALID, issues=(InputIssue(path, message),), reason=message)


def _too_large(message: str) -> CapabilityError:
    return CapabilityError(Code.INPUT_TOO_LARGE, reason=message)


def scan(value: Any, limits: Limits, *, strings_bounded: bool = False) -> tuple[int, bool]:
    """Check the limits over a parsed value, without recursion or path building (hot path).

    Returns (object keys seen, saw a float that may be an out-of-range integer). Messages name
    the limit, never a key or a value: keys are caller data too. `strings_bounded`: the caller
    knows no string or key can be over the limit (the whole JSON text is not longer than it),
    so only containers and numbers are looked at.
    """
    max_depth, max_list, max_str = (
        limits.max_depth,
        limits.max_list_length,
        limits.max_string_length,
    )
    check_str = not strings_bounded
    keys, suspicious = 0, False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if depth > max_depth:
                raise _too_large(f"nesting deeper than {max_depth}")
            if kind is dict:
                keys += len(node)
                children = node.values()
                if check_str and node and max(map(len, node)) > max_str:
                    raise _too_large(f"a key longer than {max_str} characters")
            else:
                if len(node) > max_list:
                    raise _too_large(f"a list longer than {max_list}")
                children = node
            for child in children:
                t = type(child)
                if t is dict or t is list:
                    stack.append((child, depth + 1))
                elif t is str:
                    if check_str and len(child) > max_str:
                        raise _too_large(f"a string longer than {max_str}")
                elif t is float and (child >= 9.2e18 or child <= -9.2e18):
                    suspicious = True
        elif kind is str:
            if check_str and len(node) > max_str:
                raise _too_large(f"a string longer than {max_str}")
        elif kind is float and (node >= 9.2e18 or node <= -9.2e18):
            suspicious = True
    return keys, suspicious


def _check_integer(text: str) -> int:
    n = int(text)
    if not _I64_MIN <= n <= _U64_MAX:
        raise _invalid("$", "integer outside the 64-bit range")
    return n


def has_nul(value: Any) -> bool:
    """Whether any string or key in a JSON value contains U+0000."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def parse_json(raw: bytes, limits: Limits, *, what: str = "input", allow_nul: bool = False) -> Any:
    """Parse caller JSON under the limits; raises CapabilityError (INPUT_TOO_LARGE/INVALID).
    `allow_nul`: U+0000 in strings is let through (upstream replies, which policies do not
    judge); callers' JSON never."""
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
    # A string has at most as many characters as the JSON text has bytes.
    keys, suspicious = scan(value, limits, strings_bounded=len(raw) <= limits.max_string_length)
    # Without a backslash no quote can be escaped, so a plain pattern counts the keys.
    key_ends = _KEY_END if b"\\" in raw else _KEY_END_PLAIN
    if keys and keys != len(key_ends.findall(raw)):
        raise _invalid("$", "duplicate object key")
    if suspicious:
        # Rare path: orjson turned an integer beyond 64 bits into a float. Re-parse exactly.
        json.loads(raw, parse_int=_check_integer)
    # JSON text holds NUL only as the escape \u0000 (a raw control character is not JSON): the
    # walk runs only when that text appears.
    if not allow_nul and b"\\u0000" in raw and has_nul(value):
        raise _invalid("$", "a string or key contains U+0000 (NUL)")
    return value


def parse_strict(raw: bytes, *, what: str) -> Any:
    """`parse_json`'s rules without its limits (the caller checks its own): for upstream JSON,
    whose limits stage 12 applies with the capability's. Empty text is not JSON here. Raises
    CapabilityError (INPUT_INVALID) naming the rule; the caller maps it to its own code."""
    if not raw.strip():
        raise _invalid("$", f"{what} is empty")
    return parse_json(raw, _RULES_ONLY, what=what, allow_nul=True)


def dumps(value: Any) -> bytes:
    """Compact JSON of a validated value (what goes upstream and back to callers)."""
    return orjson.dumps(value)
