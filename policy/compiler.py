"""Policy specs → compiled policies: check every expression, then compile it once.

Checking (cel-expr-python, typed per phase) and compiling for evaluation (the selected
backend, `dyn` declarations) both happen here, at load; a request never compiles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policy.backends import Backend
from policy.celsource import issue_at, rewrite_const
from policy.checker import MATCH_CONTEXT, Checker
from policy.document import ApprovalSpec, ExprSpec, PolicySpec
from policy.errors import LoadIssue
from policy.globs import compile_globs
from policy.model import Decision, Phase

__all__ = ["CompiledPolicy", "CompiledRule", "Program", "compile_policies"]


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled expression and its source (kept to phrase errors safely)."""

    runnable: Any
    source: str


@dataclass(frozen=True, slots=True)
class CompiledRule:
    index: int
    when: Program
    effect: Decision
    message: str | None
    approval: ApprovalSpec | None
    line: int


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    name: str
    mode: str
    scope: str
    phases: frozenset[Phase]
    ids: re.Pattern[str] | None
    tags: frozenset[str] | None
    match: Program | None
    rules: tuple[CompiledRule, ...]
    path: str
    line: int

    @property
    def enforced(self) -> bool:
        return self.mode == "enforce"

    def selects(self, capability_id: str, tags: Sequence[str]) -> bool:
        """The static part of `match`: id globs and tag intersection."""
        if self.ids is not None and not self.ids.match(capability_id):
            return False
        return self.tags is None or not self.tags.isdisjoint(tags)


def compile_policies(
    specs: Sequence[PolicySpec], checker: Checker, backend: Backend, issues: list[LoadIssue]
) -> list[CompiledPolicy]:
    """Compiled policies for `specs`; every problem found is appended to `issues`."""
    compiled = []
    for spec in specs:
        policy = _compile_policy(spec, checker, backend, issues)
        if policy is not None:
            compiled.append(policy)
    return compiled


def _compile_policy(
    spec: PolicySpec, checker: Checker, backend: Backend, issues: list[LoadIssue]
) -> CompiledPolicy | None:
    variants = checker.variants_for(spec)
    before = len(issues)
    match = None
    if spec.match_expr is not None:
        match = _program(spec.match_expr, [MATCH_CONTEXT], variants, checker, backend, issues)
    rules = []
    for rule in spec.rules:
        program = _program(rule.when, list(spec.phases), variants, checker, backend, issues)
        if program is not None:
            line = rule.when.site.line
            rules.append(CompiledRule(rule.index, program, rule.effect, rule.message, rule.approval, line))
    if Phase.EXECUTION in spec.phases and len(spec.phases) > 1:
        if any(rule.effect is Decision.REQUIRE_APPROVAL for rule in spec.rules):
            checker.notes.append(
                f"policy {spec.name!r} requires approval and also runs in the execution phase, "
                "where the call has already been approved; consider a separate policy"
            )
    if len(issues) > before:
        return None
    return CompiledPolicy(
        name=spec.name,
        mode=spec.mode,
        scope=spec.scope,
        phases=frozenset(spec.phases),
        ids=compile_globs(spec.capabilities) if spec.capabilities else None,
        tags=spec.tags,
        match=match,
        rules=tuple(rules),
        path=spec.path,
        line=spec.line,
    )


def _program(
    expr: ExprSpec,
    contexts: list[str],
    variants: Any,
    checker: Checker,
    backend: Backend,
    issues: list[LoadIssue],
) -> Program | None:
    found, _ = checker.check(expr, contexts, variants)
    if found:
        issues += found
        return None
    source = rewrite_const(expr.text)
    try:
        return Program(backend.compile(source), source)
    except ValueError as exc:
        issues.append(issue_at(expr, 1, 1, f"{backend.name}: {exc}"))
        return None
