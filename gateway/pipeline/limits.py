"""Compiling the config's limits with the snapshot: each key and amount is type-checked by the
policy checker (`input` typed from the input schema of every capability the limit selects; a
problem at file:line:column) and compiled once for evaluation with cel-expr-python."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.config.limitspec import ExprSite, LimitSpec
from policy import LoadIssue
from policy.backends.celexpr import CelExprBackend
from policy.checker import Checker
from policy.document import ExprSpec
from policy.globs import compile_globs
from policy.yamlsource import ScalarSite

_KEY_TYPES = ("string", "int", "uint")
_AMOUNT_TYPES = ("int", "uint", "double")
_NO_INPUT = "`input` is not bound"


@dataclass(frozen=True, slots=True)
class CompiledLimit:
    spec: LimitSpec
    key: Any  # a cel-expr-python program
    amount: Any | None  # budgets only
    ids: re.Pattern[str] | None
    # The key read straight from the actor when it is one of its string fields (`actor.id`,
    # `actor.attributes.tenant`, ...): the actor field's path, else None (CEL evaluates it).
    key_path: tuple[str, ...] | None = None
    amount_value: float | None = None  # a budget amount that is a plain number literal

    @property
    def name(self) -> str:
        return self.spec.name

    def selects(self, capability_id: str, tags: Sequence[str]) -> bool:
        if self.ids is not None and not self.ids.match(capability_id):
            return False
        return self.spec.tags is None or not self.spec.tags.isdisjoint(tags)


_backend: CelExprBackend | None = None


def backend() -> CelExprBackend:
    """The evaluation backend of limit expressions (one per process)."""
    global _backend  # noqa: PLW0603 - built on first use: cel-cpp's environment is not free
    if _backend is None:
        _backend = CelExprBackend()
    return _backend


def compile_limits(
    specs: Sequence[LimitSpec], registry: Mapping[str, Mapping[str, Any]] | None
) -> tuple[tuple[CompiledLimit, ...], list[LoadIssue]]:
    """The compiled limits and every problem found (both lists complete)."""
    checker = Checker(registry, {})
    issues: list[LoadIssue] = []
    out = []
    for spec in specs:
        where = f"limits[{spec.index}] ({spec.name})"
        found = [
            _reword(i)
            for i in checker.check_value(
                _expr(spec.key, spec.key_site, f"{where}.key"), None, _KEY_TYPES, "key"
            )
        ]
        amount_program = None
        if spec.budget is not None:
            variants = checker.variants_selecting(spec.capabilities, spec.tags)
            expr = _expr(spec.budget.amount, spec.budget.amount_site, f"{where}.budget.amount")
            if variants:
                found += checker.check_value(expr, variants, _AMOUNT_TYPES, "amount")
            if not found:
                amount_program = _compiled(expr, issues)
        key_program = _compiled(_expr(spec.key, spec.key_site, ""), issues) if not found else None
        issues += found
        if key_program is None or (spec.budget is not None and amount_program is None):
            continue
        ids = compile_globs(spec.capabilities) if spec.capabilities else None
        amount = _literal(spec.budget.amount) if spec.budget is not None else None
        out.append(
            CompiledLimit(spec, key_program, amount_program, ids, _actor_path(spec.key), amount)
        )
    return tuple(out), issues


_ACTOR_FIELD = re.compile(r"actor\.(id|kind|issuer)|actor\.attributes\.([A-Za-z_][A-Za-z0-9_]*)")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


def _actor_path(key: str) -> tuple[str, ...] | None:
    """The actor field a key expression only reads (a select chain CEL would evaluate to that
    field's value), or None for any other expression."""
    found = _ACTOR_FIELD.fullmatch(key.strip())
    if found is None:
        return None
    return (found[1],) if found[1] else ("attributes", found[2])


def _literal(amount: str) -> float | None:
    """A budget amount that is a decimal literal (`1`, `2.5`): its value, as CEL gives it."""
    text = amount.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def _expr(text: str, site: ExprSite, who: str) -> ExprSpec:
    segments = ((site.line, site.column, len(text)),) if site.exact else ()
    return ExprSpec(text, site.path, ScalarSite(site.line, site.column, segments), who, None)


def _reword(issue: LoadIssue) -> LoadIssue:
    if _NO_INPUT in issue.message:
        message = "a limit's key cannot read `input` (use budget.amount for the input)"
        return LoadIssue(issue.path, issue.line, issue.column, issue.policy, None, message)
    return issue


def _compiled(expr: ExprSpec, issues: list[LoadIssue]) -> Any:
    try:
        return backend().compile(expr.text)
    except ValueError as exc:
        issues.append(
            LoadIssue(expr.path, expr.site.line, expr.site.column, expr.policy, None, str(exc))
        )
        return None
