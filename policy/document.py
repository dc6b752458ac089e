"""Policy documents → specs, with the checks that need no CEL.

Schema violations are reported by `policy.schemacheck`; here each policy whose own
fields are valid becomes a `PolicySpec`, and the rules the schema cannot express
(approval only with require-approval, no require-approval in an execution-only
policy, positive durations) add located issues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from policy.durations import parse_duration
from policy.errors import LoadIssue
from policy.model import Decision, Phase
from policy.schemacheck import part_validator
from policy.yamlsource import Located, ScalarSite, YamlPath

__all__ = [
    "ApprovalSpec",
    "ExprSpec",
    "FileSpec",
    "PolicySpec",
    "RuleSpec",
    "read_document",
]

DEFAULT_APPROVER_ROLE = "approver"
_EFFECTS = frozenset(d.label for d in Decision)


@dataclass(frozen=True, slots=True)
class ExprSpec:
    """A CEL expression and where its text lives."""

    text: str
    path: str
    site: ScalarSite
    policy: str
    rule: int | None


@dataclass(frozen=True, slots=True)
class ApprovalSpec:
    """A rule's `approval` object (docs/policies.md "Approval requirements")."""

    reason: str | None
    roles: frozenset[str]
    expires_in: timedelta | None
    grantable: bool = True  # false: a standing grant never stands in for it
    quorum: int = 1  # distinct approvers; at least len(distinct_roles)
    distinct_roles: frozenset[str] = frozenset()  # each held by a different approver
    escalate_after: timedelta | None = None
    escalation_roles: frozenset[str] = frozenset()  # who may also decide once escalated


@dataclass(frozen=True, slots=True)
class RuleSpec:
    index: int
    when: ExprSpec
    effect: Decision
    message: str | None
    approval: ApprovalSpec | None


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: str
    description: str
    scope: str
    mode: str
    phases: tuple[Phase, ...]
    capabilities: tuple[str, ...] | None
    tags: frozenset[str] | None
    match_expr: ExprSpec | None
    rules: tuple[RuleSpec, ...]
    path: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class FileSpec:
    """What one document contributes: its policies and constants (with positions)."""

    policies: tuple[PolicySpec, ...]
    constants: dict[str, tuple[Any, tuple[int, int]]]


def read_document(doc: Located, path: str, issues: list[LoadIssue]) -> FileSpec:
    """Specs for every policy in `doc` whose own fields passed the schema.

    Rules with schema errors are still read when their `when` is text, so their CEL is
    checked in the same run; the set fails to load either way.
    """
    value = doc.value
    if not isinstance(value, dict) or not isinstance(value.get("policies", []), list):
        return FileSpec((), {})
    reader = _Reader(doc, path, issues)
    specs = [
        reader.policy(("policies", index), raw)
        for index, raw in enumerate(value.get("policies", []))
        if part_validator("policy").is_valid(raw)
    ]
    constants: dict[str, tuple[Any, tuple[int, int]]] = {}
    raw_constants = value.get("constants", {})
    if part_validator("constants").is_valid(raw_constants):
        for key, item in raw_constants.items():
            constants[str(key)] = (item, doc.key_position(("constants", key)))
    return FileSpec(tuple(specs), constants)


class _Reader:
    def __init__(self, doc: Located, path: str, issues: list[LoadIssue]) -> None:
        self.doc = doc
        self.path = path
        self.issues = issues

    def policy(self, at: YamlPath, raw: dict[str, Any]) -> PolicySpec:
        name: str = raw["name"]
        phases = tuple(Phase(p) for p in raw.get("phases", ["invocation"]))
        match = raw.get("match", {})
        match_expr = None
        if "expr" in match:
            site = self.doc.sites[(*at, "match", "expr")]
            match_expr = ExprSpec(match["expr"], self.path, site, name, None)
        rules = tuple(
            self.rule((*at, "rules", i), name, phases, r)
            for i, r in enumerate(raw["rules"])
            if isinstance(r, dict) and isinstance(r.get("when"), str | bool) and r["when"] != ""
        )
        line, column = self.doc.position((*at, "name"))
        return PolicySpec(
            name=name,
            description=raw.get("description", ""),
            scope=raw.get("scope", "global"),
            mode=raw.get("mode", "enforce"),
            phases=phases,
            capabilities=tuple(match["capabilities"]) if "capabilities" in match else None,
            tags=frozenset(match["tags"]) if "tags" in match else None,
            match_expr=match_expr,
            rules=rules,
            path=self.path,
            line=line,
            column=column,
        )

    def rule(
        self, at: YamlPath, policy: str, phases: tuple[Phase, ...], raw: dict[str, Any]
    ) -> RuleSpec:
        index = int(at[-1])

        def issue(key: str | YamlPath, message: str) -> None:
            line, column = self.doc.key_position((*at, *((key,) if isinstance(key, str) else key)))
            self.issues.append(LoadIssue(self.path, line, column, policy, index, message))

        when = raw["when"]
        text = ("true" if when else "false") if isinstance(when, bool) else str(when)
        label = raw.get("effect")
        effect = Decision.from_label(label) if label in _EFFECTS else None
        if effect is Decision.REQUIRE_APPROVAL and phases == (Phase.EXECUTION,):
            issue("effect", "require-approval is not allowed in an execution-only policy")
        approval = None
        if "approval" in raw and part_validator("approval").is_valid(raw["approval"]):
            if effect is not None and effect is not Decision.REQUIRE_APPROVAL:
                issue("approval", f"approval is only allowed with require-approval, not {label}")
            approval = _approval(raw["approval"], issue)
        expr = ExprSpec(text, self.path, self.doc.sites[(*at, "when")], policy, index)
        return RuleSpec(index, expr, effect or Decision.ALLOW, raw.get("message"), approval)


def _approval(raw: dict[str, Any], issue: Callable[[str | YamlPath, str], None]) -> ApprovalSpec:
    expires = _duration(raw, "expires_in", issue)
    escalate = _duration(raw, "escalate_after", issue)
    escalation_roles = frozenset(raw.get("escalation_roles", ()))
    if escalation_roles and "escalate_after" not in raw:
        issue(("approval", "escalation_roles"), "escalation_roles needs escalate_after")
    if "escalate_after" in raw and not escalation_roles:
        issue(("approval", "escalate_after"), "escalate_after needs escalation_roles")
    roles = frozenset(raw.get("approvers", {}).get("roles", [DEFAULT_APPROVER_ROLE]))
    distinct = frozenset(raw.get("distinct_roles", ()))
    return ApprovalSpec(
        reason=raw.get("reason"),
        roles=roles,
        expires_in=expires,
        grantable=raw.get("grantable", True),
        quorum=max(raw.get("quorum", 1), len(distinct)),
        distinct_roles=distinct,
        escalate_after=escalate,
        escalation_roles=escalation_roles,
    )


def _duration(
    raw: dict[str, Any], key: str, issue: Callable[[str | YamlPath, str], None]
) -> timedelta | None:
    if key not in raw:
        return None
    try:
        return parse_duration(raw[key])
    except ValueError as exc:
        issue(("approval", key), str(exc))
        return None
