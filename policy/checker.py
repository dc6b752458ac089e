"""Load-time type checking of every CEL expression with cel-expr-python (cel-cpp).

Each expression is checked once per phase it runs in, against an environment declaring
only that phase's variables (so `input` in discovery or `approval` before execution is
an error). With a registry, `input` is checked against the input type of every
capability the policy can apply to; the expression must check against at least one of
them, so a property that no matched capability's schema has is reported. Without a
registry `input` is `dyn`, and the checker says so in a note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2
from cel_expr_python import cel

from policy.celast import ExprFacts, read_facts, read_paths
from policy.celsource import CONST_VAR, Diagnostic, diagnostics, issue_at, rewrite_const
from policy.diagnose import MATCH_CONTEXT, Variant, explain
from policy.document import ExprSpec, PolicySpec
from policy.errors import LoadIssue
from policy.globs import compile_globs
from policy.hooktypes import hooks_type
from policy.model import Phase
from policy.schematypes import CONTEXT_TYPES, TypeBuilder

__all__ = ["MATCH_CONTEXT", "Checker"]


_DYN = "dyn"
_MAP_STYLE_USE = re.compile(
    r"found no matching overload for .* applied to '\(.*capgate\.check\.t\d+"
)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@dataclass(frozen=True, slots=True)
class _Capability:
    tags: frozenset[str]
    variant: str


class Checker:
    """Checks expressions; holds the per-phase, per-input-type environments it builds."""

    def __init__(
        self,
        registry: Mapping[str, Mapping[str, Any]] | None,
        constants: Mapping[str, Any],
        *,
        limit_names: Sequence[str] = (),
        hooks: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.types = TypeBuilder()
        # The gateway's limits, readable in the execution phase as `limits.<name>.remaining`
        # (docs/limits.md): a name no limit has is a load error.
        self._limits_type = self.types.limits_type(limit_names) if limit_names else None
        # The gateway's pre-hooks' declared context attributes, readable with `input` as
        # `hooks.<hook>.<attribute>` (docs/hooks.md): an undeclared one is a load error.
        self._hooks_type = hooks_type(self.types, hooks) if hooks else None
        self.notes: list[str] = []
        self._const_type = self.types.constants_type(constants) if constants else None
        self._envs: dict[tuple[str, str, bool], Any] = {}
        self._registry = registry is not None
        self._caps: dict[str, _Capability] = {}
        self._variants: dict[str, Variant] = {}
        if registry is None:
            self.notes.append(
                "input is dyn: no capability registry was given, so fields of `input` are not "
                "checked (pass --config with the gateway config to check them)"
            )
        else:
            self._index(registry)

    def _index(self, registry: Mapping[str, Mapping[str, Any]]) -> None:
        by_schema: dict[str, list[str]] = {}
        untyped = []
        for cap_id, entry in registry.items():
            schema = entry.get("input_schema")
            key = json.dumps(schema, sort_keys=True) if isinstance(schema, Mapping) else _DYN
            if key == _DYN:
                untyped.append(cap_id)
            by_schema.setdefault(key, []).append(cap_id)
            self._caps[cap_id] = _Capability(frozenset(entry.get("tags") or ()), key)
        for key, ids in by_schema.items():
            type_name = None if key == _DYN else self.types.input_type(json.loads(key))
            self._variants[key] = Variant(key, type_name, tuple(ids))
        if untyped:
            self.notes.append(
                f"input is dyn for capabilities without input_schema: {', '.join(untyped)}"
            )

    def variants_for(self, policy: PolicySpec) -> list[Variant]:
        """The input types `policy` can meet; `[dyn]` without a registry or a match."""
        dyn = [Variant(_DYN, None, ())]
        if not self._registry:
            return dyn
        keys = self._selected_variants(policy.capabilities, policy.tags)
        if not keys:
            self.notes.append(
                f"policy {policy.name!r} ({policy.path}:{policy.line}) matches no capability "
                "in the registry; input is dyn for it"
            )
            return dyn
        return [self._variants[k] for k in keys]

    def variants_selecting(
        self, capabilities: Sequence[str] | None, tags: frozenset[str] | None
    ) -> list[Variant]:
        """The input types of the capabilities a selector (id globs, tags) matches: `[dyn]`
        without a registry, `[]` when it matches none."""
        if not self._registry:
            return [Variant(_DYN, None, ())]
        return [self._variants[k] for k in self._selected_variants(capabilities, tags)]

    def _selected_variants(
        self, capabilities: Sequence[str] | None, tags: frozenset[str] | None
    ) -> dict[str, None]:
        pattern = compile_globs(capabilities) if capabilities else None
        keys: dict[str, None] = {}
        for cap_id, cap in self._caps.items():
            if pattern is not None and not pattern.match(cap_id):
                continue
            if tags is not None and not tags & cap.tags:
                continue
            keys[cap.variant] = None
        return keys

    def check_value(
        self,
        expr: ExprSpec,
        variants: Sequence[Variant] | None,
        types: Sequence[str],
        what: str,
    ) -> list[LoadIssue]:
        """A value expression outside the policy files (a gateway limit's key or amount),
        checked as in the invocation phase: `input` typed by each of `variants` (it must check
        against one), or not declared at all when `variants` is None. Its result must be one
        of the CEL `types` (`string`, `int`, `double`, ...); `dyn` is accepted."""
        source = rewrite_const(expr.text)
        failures: list[tuple[Variant, list[Diagnostic]]] = []
        for variant in variants if variants is not None else [None]:
            outcome = self._compile(Phase.INVOCATION, variant, source)
            if isinstance(outcome, list):
                failures.append((variant or Variant(_DYN, None, ()), outcome))
                continue
            result = outcome.return_type()
            if result == cel.Type.DYN or result.name().lower() in types:
                return []
            expected = " or ".join(types)
            return [issue_at(expr, 1, 1, f"{what} must be {expected}, but it is {result.name()}")]
        return explain(expr, Phase.INVOCATION, failures, self.types.labels) if failures else []

    def check(
        self, expr: ExprSpec, contexts: Sequence[str], variants: Sequence[Variant]
    ) -> list[LoadIssue]:
        """Every problem with `expr` in any of `contexts` (phases, or MATCH_CONTEXT)."""
        source = rewrite_const(expr.text)
        issues: list[LoadIssue] = []
        regexes_checked = False
        for context in contexts:
            has_input = context in {Phase.INVOCATION, Phase.EXECUTION}
            failures: list[tuple[Variant, list[Diagnostic]]] = []
            checked = None
            for variant in variants if has_input else variants[:1]:
                outcome = self._compile(context, variant if has_input else None, source)
                if not isinstance(outcome, list):
                    checked = outcome  # one input type that accepts the expression is enough
                    break
                failures.append((variant, outcome))
            if checked is None:
                issues += explain(expr, context, failures, self.types.labels)
                continue
            issues += _bool_issues(expr, checked)
            if not regexes_checked:
                issues += _regex_issues(expr, read_facts(checked.serialize()))
                regexes_checked = True
        return sorted(set(issues))

    def input_free(self, expr: ExprSpec) -> bool:
        """Whether `expr` compiles in the invocation phase with no `input` declared: then it
        cannot read the input (an iteration variable that happens to be named `input` is not
        the variable), and the gateway may evaluate it before input validation (ADR 0016)."""
        source = rewrite_const(expr.text)
        return not isinstance(self._compile(Phase.INVOCATION, None, source), list)

    def paths_read(self, expr: ExprSpec, context: str) -> frozenset[tuple[str, ...]] | None:
        """The variable paths `expr` reads when compiled in `context` (input as dyn), e.g.
        {("actor", "roles"), ("surface",)}; None when it does not compile there (unknown: a
        caller assumes it reads everything). Describe's cache keys by these (docs/policies.md)."""
        dyn = Variant(_DYN, None, ())
        has_input = context in {Phase.INVOCATION, Phase.EXECUTION}
        outcome = self._compile(context, dyn if has_input else None, rewrite_const(expr.text))
        if isinstance(outcome, list):
            return None
        return read_paths(outcome.serialize())

    def reads_hooks(self, expr: ExprSpec, contexts: Sequence[str]) -> bool:
        """Whether `expr` may read `hooks`: it does not compile, in one of `contexts`, with
        `hooks` left undeclared (input as dyn). Policies that cannot read hooks are evaluated
        before the pre-hooks are called too, so that their deny or hide stops the call before
        any hook sees it (docs/hooks.md)."""
        if self._hooks_type is None:
            return False
        source = rewrite_const(expr.text)
        dyn = Variant(_DYN, None, ())
        phases = [c for c in contexts if c in {Phase.INVOCATION, Phase.EXECUTION}]
        return any(
            isinstance(self._compile(c, dyn, source, with_hooks=False), list) for c in phases
        )

    def _compile(
        self, context: str, variant: Variant | None, source: str, *, with_hooks: bool = True
    ) -> Any:
        try:
            return self._env(context, variant, with_hooks).compile(source)
        except RuntimeError as exc:
            text = str(exc)
            if variant is not None and variant.type_name and _MAP_STYLE_USE.search(text):
                # `'x' in input` or `input['x']` treat the input as a map, which its record
                # type does not allow; field names cannot be checked there, types can.
                return self._compile(
                    context, Variant(_DYN, None, ()), source, with_hooks=with_hooks
                )
            return diagnostics(text)

    def _env(self, context: str, variant: Variant | None, with_hooks: bool = True) -> Any:
        key = (context, variant.key if variant else "-", with_hooks)
        env = self._envs.get(key)
        if env is None:
            declared = self._declarations(context, variant, with_hooks)
            env = cel.NewEnv(self.types.pool, variables=declared)
            self._envs[key] = env
        return env

    def _declarations(
        self, context: str, variant: Variant | None, with_hooks: bool = True
    ) -> dict[str, Any]:
        names = ["actor", "capability", "request"]
        if context == Phase.EXECUTION:
            names.append("approval")
        declared: dict[str, Any] = {n: cel.Type(CONTEXT_TYPES[n]) for n in names}
        if context == Phase.EXECUTION and self._limits_type:
            declared["limits"] = cel.Type(self._limits_type)
        declared["surface"] = cel.Type.STRING
        if self._const_type:
            declared[CONST_VAR] = cel.Type(self._const_type)
        if variant is not None:
            declared["input"] = cel.Type(variant.type_name) if variant.type_name else cel.Type.DYN
            if self._hooks_type and with_hooks:
                declared["hooks"] = cel.Type(self._hooks_type)
        return declared


def _bool_issues(expr: ExprSpec, compiled: Any) -> list[LoadIssue]:
    result = compiled.return_type()
    if result in (cel.Type.BOOL, cel.Type.DYN):
        return []
    what = "match.expr" if expr.rule is None else "when"
    return [issue_at(expr, 1, 1, f"{what} must be a bool expression, but it is {result.name()}")]


def _regex_issues(expr: ExprSpec, facts: ExprFacts) -> list[LoadIssue]:
    issues = []
    for pattern, offset in facts.patterns:
        try:
            re2.compile(pattern, _RE2_OPTIONS)
        except re2.error as exc:
            reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
            line = expr.text.count("\n", 0, offset) + 1
            column = offset - (expr.text.rfind("\n", 0, offset) + 1) + 1
            issues.append(
                issue_at(expr, line, column, f"invalid regex {pattern!r} in matches(): {reason}")
            )
    return issues
