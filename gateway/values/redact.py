"""Redaction (stage 13, SI-10): one spec for outputs, stored idempotent results and approval views.

Paths are a JSONPath subset compiled at load: `$.a.b`, `$.items[*].c`, `$.a[*]`. Actions:
`drop` removes the member, `mask` replaces the value with "****", `hmac` replaces it with a
keyed digest ("hmac:<key id>:<hex>") so equal values stay correlatable without being readable.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.model import RedactRule

MASK = "****"
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[\*\]|\['([^']+)'\]")
_ANY = object()


class RedactPathError(ValueError):
    """A redaction path outside the supported subset (a load-time error)."""


def parse_path(path: str) -> tuple[object, ...]:
    """`$.items[*].card` -> ("items", _ANY, "card"); raises RedactPathError."""
    if not path.startswith("$"):
        raise RedactPathError(f"redaction path {path!r} must start with '$'")
    parts: list[object] = []
    pos = 1
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise RedactPathError(
                f"redaction path {path!r}: unsupported syntax at column {pos + 1}"
            )
        parts.append(_ANY if m.group(0) == "[*]" else (m.group(1) or m.group(2)))
        pos = m.end()
    if not parts:
        raise RedactPathError(f"redaction path {path!r} selects the whole value")
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class _Compiled:
    parts: tuple[object, ...]
    action: str


def _matches(parts: tuple[object, ...], tokens: Sequence[str]) -> bool:
    """Whether the common prefix of a rule's parts and a location's tokens agrees."""
    return all(p is _ANY or p == t for p, t in zip(parts, tokens, strict=False))


def _named(parts: tuple[object, ...], tokens: Sequence[str]) -> tuple[str, ...]:
    named: list[str] = []
    for part, token in zip(parts, tokens, strict=False):
        if part is _ANY and not token.isdigit():
            break  # an object key a wildcard matched: say only its object
        named.append(token)
    return tuple(named)


class Redactor:
    """Compiled rules; `apply` returns a redacted deep copy and never mutates its argument."""

    __slots__ = ("_key", "_key_id", "_rules")

    def __init__(self, rules: Sequence[RedactRule], *, hmac_key: bytes = b"", key_id: str = "k1"):
        self._rules = tuple(_Compiled(parse_path(r.path), r.action) for r in rules)
        if any(r.action == "hmac" for r in self._rules) and not hmac_key:
            raise RedactPathError("hmac redaction needs audit.hmac_key to be set")
        self._key = hmac_key
        self._key_id = key_id

    def __bool__(self) -> bool:
        return bool(self._rules)

    def apply(self, value: Any, *, in_place: bool = False) -> Any:
        """The redacted value. `in_place` skips the copy when the caller owns `value` (a fresh
        upstream output); approval views must copy, the stored input is hashed again later."""
        if not self._rules:
            return value
        out = value if in_place else copy.deepcopy(value)
        for rule in self._rules:
            self._walk(out, rule.parts, rule.action)
        return out

    def hidden_at(self, tokens: Sequence[str]) -> tuple[str, ...] | None:
        """The RFC 6901 tokens of the redacted value that the location `tokens` is at or under
        (the first rule that matches; None: no rule hides it). A wildcard that matched an
        object key is not named: the location stops at that object, so the key stays unsaid."""
        for rule in self._rules:
            if len(tokens) >= len(rule.parts) and _matches(rule.parts, tokens):
                return _named(rule.parts, tokens)
        return None

    def touches_hidden(self, tokens: Sequence[str]) -> bool:
        """Whether the location `tokens` is at or under a redacted path, or holds one (a parent
        of a value a rule hides): changing it would change what approvers cannot see."""
        return any(_matches(r.parts, tokens) for r in self._rules)

    def _walk(self, node: Any, parts: tuple[object, ...], action: str) -> None:
        head, rest = parts[0], parts[1:]
        if head is _ANY:
            if isinstance(node, list):
                if rest:
                    for item in node:
                        self._walk(item, rest, action)
                else:
                    for i, item in enumerate(node):
                        node[i] = self._replace(item, action)
                    if action == "drop":
                        node.clear()
            elif isinstance(node, dict):
                for key in list(node):
                    self._step(node, key, rest, action)
            return
        if isinstance(node, dict) and head in node:
            self._step(node, head, rest, action)

    def _step(self, node: dict[Any, Any], key: Any, rest: tuple[object, ...], action: str) -> None:
        if rest:
            self._walk(node[key], rest, action)
        elif action == "drop":
            del node[key]
        else:
            node[key] = self._replace(node[key], action)

    def _replace(self, value: Any, action: str) -> Any:
        if action == "mask":
            return MASK
        text = value if isinstance(value, str) else repr(value)
        digest = hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()[:32]
        return f"hmac:{self._key_id}:{digest}"
