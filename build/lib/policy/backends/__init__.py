"""Evaluation backends: cel-expr-python (default) and cel-python (evaluation only).

A backend compiles checked source once at load, turns one request's bindings into an
activation once per request, and runs a program against it. `run` returns True, False
or an error text (which the engine makes safe before it reaches a stance).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["BACKENDS", "Backend", "make_backend", "safe_error"]


class Backend(Protocol):
    """What the engine needs from a CEL implementation."""

    name: str

    def compile(self, source: str) -> Any:
        """A runnable program; raises ValueError when the source cannot be compiled."""

    def activation(self, bindings: dict[str, Any]) -> Any:
        """The request's activation, built once and shared by all programs.

        `bindings` is fresh per request (the backend may convert it in place): plain JSON
        values, with `request.now` and `approval.decided_at` as aware datetimes.
        """

    def run(self, program: Any, activation: Any) -> bool | str:
        """True or False, or the backend's error text."""


def _cel_expr() -> Backend:
    from policy.backends.celexpr import CelExprBackend  # noqa: PLC0415 - optional import cost

    return CelExprBackend()


def _cel_python() -> Backend:
    from policy.backends.celpython import CelPythonBackend  # noqa: PLC0415 - optional import cost

    return CelPythonBackend()


BACKENDS: dict[str, Callable[[], Backend]] = {
    "cel-expr-python": _cel_expr,
    "cel-python": _cel_python,
}


def make_backend(name: str) -> Backend:
    """The backend called `name`; ValueError for an unknown one."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise ValueError(f"unknown CEL backend {name!r} (choose from {', '.join(BACKENDS)})")
    return factory()


# Raw evaluation errors can quote request values (a bad regex, a huge integer), so only a
# fixed category reaches the stance (SI-7 audit text, SI-10 no payloads).
_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("iteration budget", "iteration budget exceeded"),
    ("key not found", "no such key"),
    ("no such member", "no such key"),
    ("no such key", "no such key"),
    ("overload", "no matching overload"),
    ("overflow", "integer overflow"),
    ("divide by zero", "division by zero"),
    ("modulus by zero", "division by zero"),
    ("regular expression", "invalid regular expression"),
    ("match error", "invalid regular expression"),
    ("integer value", "integer out of range in the request"),
    ("non-cel value", "unsupported value type in the request"),
    ("no value with name", "unbound variable"),
    ("undeclared reference", "unbound variable"),
    ("select to non-message", "field selection on a value that is not a map"),
    ("invalid container", "indexing a value that is not a list or map"),
    ("index", "index out of range"),
    ("conversion", "type conversion failed"),
    ("cannot convert", "type conversion failed"),
)
_QUOTED_KEY = re.compile(r"""(?:map\s*:\s*"|mapping:\s*')([A-Za-z_][A-Za-z0-9_]*)["']""")


def safe_error(raw: str, source: str) -> str:
    """A fixed description of `raw`; a missing key is named only if `source` spells it."""
    if raw.startswith("result is ") and raw.endswith(", not bool"):
        return raw
    lowered = raw.lower()
    for needle, category in _CATEGORIES:
        if needle in lowered:
            key = _QUOTED_KEY.search(raw)
            if category == "no such key" and key and key.group(1) in source:
                return f"no such key {key.group(1)!r}"
            return category
    return "evaluation error"
