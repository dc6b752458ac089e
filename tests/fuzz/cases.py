"""Hostile inputs, fixed and generated from a seed (`random.Random(seed)`: the same seed gives
the same cases on every machine, so a failure names the seed and case that reproduce it).

`reference_invalid` is the suite's own strict JSON oracle, written independently of the
gateway's parser (gateway/values/jsonvalue.py): text it refuses must be refused by the gateway too.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

# gRPC metadata values are printable ASCII (0x20-0x7E, the gRPC HTTP/2 spec); headers over
# 8 KiB exceed grpcio's default limit. A value outside either cannot reach the upstream as sent.
METADATA_MAX = 8192


def transportable(value: str) -> bool:
    """Could `value` be forwarded verbatim as a gRPC metadata value?"""
    return len(value) <= METADATA_MAX and all(0x20 <= ord(c) <= 0x7E for c in value)


# Named hostile strings for request fields (capability ids, correlation ids, idempotency keys,
# approval ids, metadata values). Every one is valid UTF-8 text (a proto3 string can carry it).
HOSTILE_TEXT: dict[str, str] = {
    "nul": "a\x00b",
    "crlf": "id\r\nx-injected: 1",
    "lf": "id\nx",
    "cr": "id\rx",
    "tab": "id\tx",
    "del": "id\x7f",
    "c1-control": "id\x85x",
    "non-ascii": "café",
    "emoji": "\U0001f4a5",
    "bidi-override": "abc\u202edcba",
    "bidi-isolate": "\u2066abc\u2069",
    "zero-width": "a\u200bb",
    "bom": "\ufeffid",
    "fullwidth": "\uff4f\uff52\uff44",
    "leading-space": " id",
    "trailing-space": "id ",
    "only-spaces": "   ",
    "printable-ascii": "".join(chr(c) for c in range(0x20, 0x7F)),
    "long-256": "k" * 256,
    "long-4096": "k" * 4096,
    "over-8k": "k" * (METADATA_MAX + 1),
    "over-20k": "x" * 20_000,
    "long-non-ascii": "é" * 3000,
    "header-like": "x-capgate-actor-id: root",
    "percent": "%00%0d%0a",
}

_ALPHABETS: tuple[str, ...] = (
    "abcdefghijklmnopqrstuvwxyz0123456789-_.",
    "".join(chr(c) for c in range(0x20, 0x7F)),
    "\x00\x01\x07\x08\t\n\r\x1b\x7f",
    "éüßñ漢字\u0430\u0431",
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200d\ufeff",
    "\U0001f4a5\U0001f600\U00010348",
)
_LENGTHS = (0, 1, 2, 8, 64, 128, 255, 256, 257, 1024, 4096, METADATA_MAX + 1, 20_000)


def random_text(rng: random.Random) -> str:
    """A string of a boundary length, drawn from one or two hostile alphabets."""
    length = rng.choice(_LENGTHS)
    alphabets = rng.sample(_ALPHABETS, rng.choice((1, 1, 2)))
    pool = "".join(alphabets)
    if length > 512:  # long strings: a repeated chunk keeps generation cheap
        chunk = "".join(rng.choice(pool) for _ in range(64))
        return (chunk * (length // 64 + 1))[:length]
    return "".join(rng.choice(pool) for _ in range(length))


# Hostile JSON bodies: (name, bytes). Each is refused by `reference_invalid` unless listed in
# SOUND_BODIES, whose strict parse succeeds (the schema or the upstream may still refuse).
HOSTILE_BODIES: dict[str, bytes] = {
    "invalid-utf8": b'{"order_id": "\xff\xfe", "amount": 1}',
    "overlong-utf8": b'{"order_id": "\xc0\xaf", "amount": 1}',
    "surrogate-utf8": b'{"order_id": "\xed\xa0\x80", "amount": 1}',
    "truncated-utf8": b'{"order_id": "\xe2\x82", "amount": 1}',
    "lone-surrogate-escape": b'{"order_id": "\\ud800", "amount": 1}',
    "bom": b'\xef\xbb\xbf{"order_id": "o-1001", "amount": 1}',
    "nan": b'{"order_id": "o-1001", "amount": NaN}',
    "infinity": b'{"order_id": "o-1001", "amount": Infinity}',
    "minus-infinity": b'{"order_id": "o-1001", "amount": -Infinity}',
    "float-overflow": b'{"order_id": "o-1001", "amount": 1e400}',
    "int-over-64-bit": b'{"order_id": "o-1001", "amount": 36893488147419103232}',
    "int-under-64-bit": b'{"order_id": "o-1001", "amount": -36893488147419103232}',
    "int-10k-digits": b'{"order_id": "o-1001", "amount": ' + b"9" * 10_000 + b"}",
    "duplicate-key": b'{"order_id": "o-1001", "amount": 1, "amount": 2}',
    "duplicate-key-escaped": b'{"order_id": "o-1001", "amount": 1, "\\u0061mount": 2}',
    "duplicate-nested": b'{"order_id": "o-1001", "amount": 1, "reason": {"a": 1, "a": 2}}',
    "trailing-garbage": b'{"order_id": "o-1001", "amount": 1} x',
    "two-documents": b'{"order_id": "o-1001", "amount": 1}{"amount": 2}',
    "trailing-comma": b'{"order_id": "o-1001", "amount": 1,}',
    "single-quotes": b"{'order_id': 'o-1001', 'amount': 1}",
    "comment": b'{"order_id": "o-1001", /* c */ "amount": 1}',
    "raw-control-in-string": b'{"order_id": "o-\x01", "amount": 1}',
    "raw-newline-in-string": b'{"order_id": "o-\n", "amount": 1}',
    "unterminated": b'{"order_id": "o-1001", "amount": 1',
    "deep-array-33": b'{"order_id": "o-1001", "amount": 1, "reason": '
    + b"[" * 33
    + b"]" * 33
    + b"}",
    "deep-array-100k": b"[" * 100_000 + b"]" * 100_000,
    "deep-object-5k": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "unbalanced-deep": b"[" * 50_000,
    "giant-string-70k": b'{"order_id": "' + b"o" * 70_000 + b'", "amount": 1}',
    "over-max-bytes": b'{"order_id": "o-1001", "amount": 1, "reason": "' + b"r" * 300_000 + b'"}',
    "over-listener-limit": b'{"order_id": "o-1001", "amount": 1, "reason": "'
    + b"r" * 400_000
    + b'"}',
    "wrong-type-amount-string": b'{"order_id": "o-1001", "amount": "5"}',
    "wrong-type-amount-bool": b'{"order_id": "o-1001", "amount": true}',
    "wrong-type-amount-null": b'{"order_id": "o-1001", "amount": null}',
    "wrong-type-order-number": b'{"order_id": 1001, "amount": 1}',
    "wrong-type-order-list": b'{"order_id": ["o-1001"], "amount": 1}',
    "top-level-array": b'[{"order_id": "o-1001", "amount": 1}]',
    "top-level-string": b'"o-1001"',
    "top-level-number": b"1",
    "top-level-null": b"null",
    "extra-field": b'{"order_id": "o-1001", "amount": 1, "admin": true}',
    "amount-zero": b'{"order_id": "o-1001", "amount": 0}',
    "amount-negative": b'{"order_id": "o-1001", "amount": -5}',
    "amount-negative-zero": b'{"order_id": "o-1001", "amount": -0.0}',
    "missing-required": b'{"order_id": "o-1001"}',
    "empty-order-id": b'{"order_id": "", "amount": 1}',
    "order-id-65": b'{"order_id": "' + b"o" * 65 + b'", "amount": 1}',
    "reason-501": b'{"order_id": "o-1001", "amount": 1, "reason": "' + b"r" * 501 + b'"}',
    "whitespace-only": b"   ",
    "nul-byte-body": b"\x00",
}
# Strictly valid JSON text whose schema check is the gateway's business (the reference oracle
# parses these): the reply may be any documented envelope, truthful about execution.
SOUND_BODIES = frozenset(
    {
        "deep-array-33",
        "giant-string-70k",
        "over-max-bytes",
        "over-listener-limit",
        "wrong-type-amount-string",
        "wrong-type-amount-bool",
        "wrong-type-amount-null",
        "wrong-type-order-number",
        "wrong-type-order-list",
        "top-level-array",
        "top-level-string",
        "top-level-number",
        "top-level-null",
        "extra-field",
        "amount-zero",
        "amount-negative",
        "amount-negative-zero",
        "missing-required",
        "empty-order-id",
        "order-id-65",
        "reason-501",
        "duplicate-nested",
    }
)
# Valid JSON that the refund schema (tests/gateway/gateway.yaml) refuses: must be refused too.
SCHEMA_INVALID = SOUND_BODIES - {"duplicate-nested"}


class _Refused(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Refused("duplicate key")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _Refused(f"non-finite number {name}")


def _bounded_int(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise _Refused("integer beyond 64 bits")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused("float overflow")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def reference_invalid(body: bytes) -> bool:
    """True when `body` is not strict JSON text (RFC 8259 + I-JSON: UTF-8, no duplicate keys,
    finite numbers, integers in 64 bits, no lone surrogates). Empty means {} (InvokeRequest);
    the gateway reads a body of ASCII whitespace alone as empty too
    (gateway/values/jsonvalue.py)."""
    if not body.strip():
        return False
    try:
        text = body.decode("utf-8", errors="strict")
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        return True
    return _has_lone_surrogate(value)


def random_json_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 6 and roll < 0.25:
        return {random_text(rng)[:40]: random_json_value(rng, depth + 1) for _ in range(3)}
    if depth < 6 and roll < 0.4:
        return [random_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    choices: list[Any] = [
        rng.choice((0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1e308, 5e-324, 0.1)),
        rng.random() * rng.choice((1, 1e6, 1e300)),
        rng.choice((True, False, None)),
        random_text(rng)[:300],
    ]
    return rng.choice(choices)


def _mutate(rng: random.Random, body: bytes) -> bytes:
    """One byte-level mutation: flip, truncate, duplicate a slice, or splice in a hostile token."""
    if not body:
        return b"{"
    op = rng.randrange(5)
    at = rng.randrange(len(body))
    if op == 0:
        return body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
    if op == 1:
        return body[:at]
    if op == 2:
        end = min(len(body), at + rng.randint(1, 16))
        return body[:end] + body[at:end] + body[end:]
    tokens = (b"\xff", b"\x00", b"NaN", b"1e999", b'"a":1,', b"[" * 40, b"\\ud800", b",,", b"}")
    return body[:at] + rng.choice(tokens) + body[at:]


@dataclass(frozen=True)
class BodyCase:
    name: str
    capability: str
    body: bytes


def random_body_case(rng: random.Random, index: int) -> BodyCase:
    """A refund or get input: a sound object, random values, or a mutated serialization."""
    capability = rng.choice(("orders.refund", "orders.get", "orders.list"))
    if capability == "orders.refund":
        value: Any = {"order_id": "o-1001", "amount": rng.choice((1, 2.5, 600, 20_000))}
    elif capability == "orders.get":
        value = {"order_id": rng.choice(("o-1001", "o-404"))}
    else:
        value = {"customer_id": "c-1"}
    roll = rng.random()
    if roll < 0.4:
        key = rng.choice((*value.keys(), random_text(rng)[:30]))
        value[key] = random_json_value(rng)
    elif roll < 0.55:
        value = random_json_value(rng)
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    if rng.random() < 0.5:
        text = _mutate(rng, text)
    return BodyCase(f"random-body-{index}", capability, text)
