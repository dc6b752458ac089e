"""Redaction by expression (stage 13): a capability's `redact.output_expr` is a CEL expression
over `output`, `actor` and `capability` whose value replaces the output. Compiled once at load;
an evaluation error withholds the output (OUTPUT_INVALID), never leaks the unredacted one.

The value must have a JSON form. An expression whose checked type has none (bytes, duration,
timestamp, a type, a map with non-string keys, or a list or map of them) is refused at load;
a `dyn` value without one (`dyn(b"x")`, a map keyed by integers, NaN) is OUTPUT_INVALID at
stage 13: the upstream ran (`executed_before_failure`, COMPLETED), the output is withheld."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from cel_expr_python import cel

from gateway.errors import CapabilityError, Code

_ENV = cel.NewEnv(
    variables={"output": cel.Type.DYN, "actor": cel.Type.DYN, "capability": cel.Type.DYN}
)


# CEL types with no JSON form; a map's keys must be strings (or dyn: checked at run time).
_NO_JSON: Final = frozenset({"BYTES", "DURATION", "TIMESTAMP", "TYPE"})
_TOKEN: Final = re.compile(r"[^<>,\s]+|[<>,]")
_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1


def json_type_problem(type_name: str) -> str | None:
    """Why a CEL checked type (`return_type().name()`, e.g. `MAP<STRING, LIST<BYTES>>`) has no
    JSON form, or None when it has one or may have one (dyn, numbers, strings, ...)."""
    tokens = _TOKEN.findall(type_name)
    pos = 0

    def parse() -> tuple[str, str | None]:  # (outer name, problem)
        nonlocal pos
        name = tokens[pos] if pos < len(tokens) else ""
        pos += 1
        args: list[str] = []
        problem = name if name in _NO_JSON else None
        if pos < len(tokens) and tokens[pos] == "<":
            pos += 1
            while pos < len(tokens):
                arg, inner = parse()
                args.append(arg)
                problem = problem or inner
                if pos < len(tokens) and tokens[pos] == ",":
                    pos += 1
                    continue
                pos += 1  # ">"
                break
        if name == "MAP" and args and args[0] not in ("STRING", "DYN"):
            problem = problem or f"{args[0]} map keys"
        return name, problem

    return parse()[1]


def _has_json_form(value: Any) -> bool:
    """Whether a plain value is JSON: objects with string keys, arrays, strings, finite
    numbers (integers within 64 bits), booleans and null. Iterative: no recursion limit."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            if not all(type(k) is str for k in node):
                return False
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is int:
            if not _I64_MIN <= node <= _U64_MAX:
                return False
        elif kind is float:
            if not math.isfinite(node):
                return False
        elif node is not None and kind is not str and kind is not bool:
            return False
    return True


class OutputExprError(ValueError):
    """The expression does not compile (a load error)."""


class OutputExpr:
    __slots__ = ("_program", "source")

    def __init__(self, source: str):
        self.source = source
        try:
            self._program = _ENV.compile(source)
        except RuntimeError as exc:
            raise OutputExprError(f"redact.output_expr does not compile: {exc}") from None
        type_name = self._program.return_type().name()
        problem = json_type_problem(type_name)
        if problem is not None:
            raise OutputExprError(
                f"redact.output_expr yields {type_name}: no JSON form for {problem}"
                " (its value replaces the output, which must be JSON)"
            )

    def apply(self, output: Any, *, actor: Mapping[str, Any], capability: Mapping[str, Any]) -> Any:
        try:
            value = self._program.eval(
                _ENV.Activation({"output": output, "actor": actor, "capability": capability})
            )
        except RuntimeError:
            value = None
        if value is None or value.type() == cel.Type.ERROR:
            # SI-10: when redaction cannot run, nothing leaves.
            raise CapabilityError(Code.OUTPUT_INVALID, executed=True, reason="output_expr failed")
        plain = value.plain_value()
        if not _has_json_form(plain):
            raise CapabilityError(
                Code.OUTPUT_INVALID, executed=True, reason="output_expr value has no JSON form"
            )
        return plain
