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
    # No rule reads `input` (match never may): decidable before input validation (ADR 0016).
    input_free: bool = False
    # Some rule may read `hooks` (docs/hooks.md): decidable only after the pre-hooks ran.
    reads_hooks: bool = False
    # What the discovery phase's evaluation of it may read (match and rules), as variable
    # paths; None when unknown (read everything). Empty for a policy not in that phase.
    discovery_reads: frozenset[tuple[str, ...]] | None = frozenset()

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
    compiler = _Compiler(checker, backend, issues)
    return [p for p in map(compiler.policy, specs) if p is not None]


class _Compiler:
    def __init__(self, checker: Checker, backend: Backend, issues: list[LoadIssue]) -> None:
        self.checker = checker
        self.backend = backend
        self.issues = issues

    def policy(self, spec: PolicySpec) -> CompiledPolicy | None:
        variants = self.checker.variants_for(spec)
        before = len(self.issues)
        match = None
        if spec.match_expr is not None:
            match = self._program(spec.match_expr, [MATCH_CONTEXT], variants)
        rules = []
        for rule in spec.rules:
            program = self._program(rule.when, list(spec.phases), variants)
            if program is not None:
                rules.append(
                    CompiledRule(
                        rule.index,
                        program,
                        rule.effect,
                        rule.message,
                        rule.approval,
                        rule.when.site.line,
                    )
                )
        approves = any(rule.effect is Decision.REQUIRE_APPROVAL for rule in spec.rules)
        if approves and Phase.EXECUTION in spec.phases and len(spec.phases) > 1:
            self.checker.notes.append(
                f"policy {spec.name!r} requires approval and also runs in the execution phase, "
                "where the call has already been approved; consider a separate policy"
            )
        if len(self.issues) > before:
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
            input_free=all(self.checker.input_free(rule.when) for rule in spec.rules),
            reads_hooks=any(
                self.checker.reads_hooks(rule.when, list(spec.phases)) for rule in spec.rules
            ),
            discovery_reads=self._discovery_reads(spec),
        )

    def _discovery_reads(self, spec: PolicySpec) -> frozenset[tuple[str, ...]] | None:
        if Phase.DISCOVERY not in spec.phases:
            return frozenset()
        found: set[tuple[str, ...]] = set()
        exprs: list[tuple[ExprSpec, str]] = [(rule.when, Phase.DISCOVERY) for rule in spec.rules]
        if spec.match_expr is not None:
            exprs.append((spec.match_expr, MATCH_CONTEXT))
        for expr, context in exprs:
            paths = self.checker.paths_read(expr, context)
            if paths is None:
                return None
            found |= paths
        return frozenset(found)

    def _program(self, expr: ExprSpec, contexts: list[str], variants: Any) -> Program | None:
        found = self.checker.check(expr, contexts, variants)
        if found:
            self.issues += found
            return None
        source = rewrite_const(expr.text)
        try:
            return Program(self.backend.compile(source), source)
        except ValueError as exc:
            self.issues.append(issue_at(expr, 1, 1, f"{self.backend.name}: {exc}"))
            return None
