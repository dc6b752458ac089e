"""A grant's `constraint` and `amount` (docs/approvals.md "Grants"): compiled with the real CEL
engine and type-checked like budgets' amounts (gateway/pipeline/limits.py) — `input` typed from
the input schema of each capability the grant covers, checked against EVERY one of them (a tag
grant must make sense for each capability carrying the tag). The expressions may read only
`input` and `actor` (as policies see them); a problem names its line:column within the
expression, since a grant's expression lives in no file.

Compiled results are kept per (snapshot revision, capabilities, texts), a bounded few, so a
grant matched on every call is compiled once per snapshot."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from gateway.errors import CapabilityError, Code
from gateway.pipeline.snapshot import Snapshot
from policy.celsource import diagnostics
from policy.checker import Checker
from policy.document import ExprSpec
from policy.errors import LoadIssue
from policy.yamlsource import ScalarSite

__all__ = ["GrantExprError", "GrantExprs", "compile_grant_exprs"]

_AMOUNT_TYPES = ("int", "uint", "double")
_BOOL_TYPES = ("bool",)
_VARIABLES = ("input", "actor")
_CACHE_SIZE = 512
_UNDECLARED = "undeclared reference to '"


class GrantExprError(Exception):
    """A grant expression that does not compile, is not of its type, or reads a field the
    input lacks. `position` is "line:column" within the expression (1-based); `field` names
    the expression ("constraint" or "amount")."""

    def __init__(self, message: str, position: str, field: str = "") -> None:
        super().__init__(f"{field + ' ' if field else ''}{position}: {message}")
        self.message = message
        self.position = position
        self.field = field


@dataclass(frozen=True)
class GrantExprs:
    """One grant's compiled expressions (cel-expr-python programs, None when absent)."""

    constraint: Any | None
    amount_program: Any | None

    def covers(self, input: Any, actor_value: Mapping[str, Any]) -> bool:
        """Whether the constraint holds for this input and actor; an error is False."""
        if self.constraint is None:
            return True
        try:
            result = self.constraint.eval(_activation(input, actor_value))
        except RuntimeError:
            return False
        return result.value() is True

    def amount(self, input: Any) -> float | None:
        """The amount this input spends of the grant's total, None without an amount."""
        if self.amount_program is None:
            return None
        value: Any = None
        try:
            result = self.amount_program.eval(_activation(input, {}))
            if result.type() != cel.Type.ERROR:
                value = result.value()
        except RuntimeError:
            value = None
        number = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        if number is None or not math.isfinite(number) or number < 0:
            raise CapabilityError(
                Code.POLICY_FAILED, reason="grant amount: not a finite number >= 0"
            )
        return number


_env: Any = None
_cache: dict[tuple[str, tuple[str, ...], str, str], GrantExprs | GrantExprError] = {}


def _evaluation_env() -> Any:
    """The environment of grant programs: only `input` and `actor`, both dyn (typed by the
    checker before; plain JSON values bind without conversion)."""
    global _env  # noqa: PLW0603 - built on first use: cel-cpp's environment is not free
    if _env is None:
        _env = cel.NewEnv(variables=dict.fromkeys(_VARIABLES, cel.Type.DYN))
    return _env


def _activation(input: Any, actor_value: Mapping[str, Any]) -> Any:
    return _evaluation_env().Activation({"input": input, "actor": dict(actor_value)})


def compile_grant_exprs(
    snapshot: Snapshot, capability_ids: Sequence[str], constraint: str, amount: str
) -> GrantExprs:
    """Both expressions compiled ("" = none) and checked against the input schema of every
    capability in `capability_ids`; raises GrantExprError at the first problem (constraint
    first)."""
    key = (snapshot.revision, tuple(capability_ids), constraint, amount)
    found = _cache.get(key)
    if found is None:
        try:
            found = _compile(snapshot, capability_ids, constraint, amount)
        except GrantExprError as exc:
            found = exc
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = found
    if isinstance(found, GrantExprError):
        raise GrantExprError(found.message, found.position, found.field)
    return found


def _compile(
    snapshot: Snapshot, capability_ids: Sequence[str], constraint: str, amount: str
) -> GrantExprs:
    registry = _registry(snapshot, capability_ids)
    checker = Checker(registry, {})
    constraint_program = amount_program = None
    if constraint.strip():
        constraint_program = _checked(checker, constraint, "constraint", _BOOL_TYPES)
    if amount.strip():
        amount_program = _checked(checker, amount, "amount", _AMOUNT_TYPES)
    return GrantExprs(constraint_program, amount_program)


def _registry(snapshot: Snapshot, capability_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The capabilities' values as the policy checker takes them (the snapshot's own)."""
    if not capability_ids:
        raise GrantExprError("the grant covers no capability", "1:1", "capability")
    registry: dict[str, dict[str, Any]] = {}
    for cap_id in capability_ids:
        prepared = snapshot.capabilities.get(cap_id)
        if prepared is None:
            raise GrantExprError(f"no capability {cap_id} in this config", "1:1", "capability")
        entry = prepared.capability.as_policy_value()
        schema = prepared.input_validator.schema
        registry[cap_id] = {**entry, "input_schema": dict(schema)} if schema else entry
    return registry


def _checked(checker: Checker, text: str, field: str, types: Sequence[str]) -> Any:
    """The program of `text`, after it compiled reading only `input` and `actor` and
    type-checked against every input type the checker knows."""
    try:
        program = _evaluation_env().compile(text)
    except RuntimeError as exc:
        first = diagnostics(str(exc))[0]
        message = first.message
        if message.startswith(_UNDECLARED):
            message += f" (a grant's {field} reads only `input` and `actor`)"
        raise GrantExprError(message, f"{first.line}:{first.column}", field) from None
    expr = _expr(text, field)
    for variant in checker.variants_selecting(None, None):
        issues = checker.check_value(expr, [variant], types, field)
        if issues:
            raise _error(issues[0], field)
    return program


def _expr(text: str, field: str) -> ExprSpec:
    """The expression placed at line 1, column 1 of a file of its own: each issue's
    line:column is its position within the expression."""
    segments = tuple((n, 1, len(line)) for n, line in enumerate(text.split("\n"), start=1))
    return ExprSpec(text, field, ScalarSite(1, 1, segments), field, None)


def _error(issue: LoadIssue, field: str) -> GrantExprError:
    return GrantExprError(issue.message, f"{issue.line}:{issue.column}", field)
