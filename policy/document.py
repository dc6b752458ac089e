"""Policy files → validated specs: the JSON Schema check and the non-CEL rules.

The published schema (`policy/schema/policy-file.schema.json`) is the single source of
the file shape; every violation becomes a located `LoadIssue`. Policies that pass the
schema become `PolicySpec`s so that their CEL can be checked in the same run.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from policy.durations import parse_duration
from policy.errors import LoadIssue
from policy.model import Decision, Phase
from policy.yamlsource import Located, ScalarSite, YamlPath

__all__ = [
    "ApprovalSpec",
    "ExprSpec",
    "FileSpec",
    "PolicySpec",
    "RuleSpec",
    "read_document",
    "schema_issues",
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
    reason: str | None
    roles: frozenset[str]
    expires_in: timedelta | None


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


@cache
def policy_file_schema() -> dict[str, Any]:
    """The published JSON Schema of policy files."""
    text = resources.files("policy").joinpath("schema/policy-file.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    text = resources.files("policy").joinpath(f"schema/{schema_name}").read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def schema_issues(
    doc: Located, path: str, schema_name: str = "policy-file.schema.json"
) -> list[LoadIssue]:
    """Every schema violation in `doc`, located and attributed to its policy and rule."""
    issues: list[LoadIssue] = []
    for err in _validator(schema_name).iter_errors(doc.value):
        where: YamlPath = tuple(err.absolute_path)
        policy, rule = _owner(doc.value, where)
        for at, message in _describe(err, where):
            line, column = doc.key_position(at) if at != where else doc.position(at)
            issues.append(LoadIssue(path, line, column, policy, rule, message))
    return issues


def _owner(value: Any, where: YamlPath) -> tuple[str | None, int | None]:
    if len(where) < 2 or where[0] not in {"policies", "tests"} or not isinstance(where[1], int):
        return None, None
    item = value[where[0]][where[1]]
    name = item.get("name") if isinstance(item, dict) else None
    label = name if isinstance(name, str) else f"{where[0]}[{where[1]}]"
    rule = where[3] if len(where) > 3 and where[2] == "rules" and isinstance(where[3], int) else None
    return label, rule


def _describe(err: jsonschema.ValidationError, where: YamlPath) -> list[tuple[YamlPath, str]]:
    field = str(where[-1]) if where and isinstance(where[-1], str) else "value"
    instance = err.instance
    if err.validator == "additionalProperties" and isinstance(instance, dict):
        known = list(err.schema.get("properties", {}))
        out = []
        for key in instance:
            if key not in known:
                hint = difflib.get_close_matches(str(key), known, n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else f"; allowed: {', '.join(known)}"
                out.append(((*where, key), f"unknown field {key!r}{extra}"))
        return out
    if err.validator == "required" and isinstance(instance, dict):
        missing = [k for k in err.validator_value if k not in instance]
        return [(where, f"missing required field {k!r}") for k in missing]
    if err.validator == "enum":
        allowed = ", ".join(str(v) for v in err.validator_value)
        return [(where, f"{field}: {instance!r} is not one of {allowed}")]
    if err.validator == "pattern":
        return [(where, f"{field}: {instance!r} {_PATTERN_HINTS.get(field, 'has the wrong form')}")]
    if err.validator == "propertyNames":
        return [(where, f"{field}: names must be CEL identifiers ({err.message})")]
    return [(where, f"{field}: {err.message}")]


_PATTERN_HINTS = {
    "name": "is not a valid name (letters, digits, '.', '_', '-'; at most 128)",
    "expires_in": "is not a duration like 90s, 15m or 1h30m",
}


def read_document(doc: Located, path: str, issues: list[LoadIssue]) -> FileSpec:
    """Specs for every policy in `doc` that passed the schema; other problems → `issues`."""
    value = doc.value
    if not isinstance(value, dict) or not isinstance(value.get("policies", []), list):
        return FileSpec((), {})
    specs = [
        _policy(doc, path, ("policies", index), raw, issues)
        for index, raw in enumerate(value.get("policies", []))
        if _part_validator("policy").is_valid(raw)
    ]
    constants: dict[str, tuple[Any, tuple[int, int]]] = {}
    raw_constants = value.get("constants", {})
    if _part_validator("constants").is_valid(raw_constants):
        for key, item in raw_constants.items():
            constants[str(key)] = (item, doc.key_position(("constants", key)))
    return FileSpec(tuple(specs), constants)


@cache
def _part_validator(part: str) -> jsonschema.Draft202012Validator:
    """A validator for one part of a file, so that valid parts are checked next to bad ones.

    `policy` checks a policy's own fields but not its rules; `rule` checks one rule.
    """
    schema = policy_file_schema()
    defs = schema["$defs"]
    if part == "constants":
        target = schema["properties"]["constants"]
    elif part == "policy":
        head = defs["policy"]
        target = {**head, "properties": {**head["properties"], "rules": {"type": "array"}}}
    else:
        target = defs[part]
    return jsonschema.Draft202012Validator({**target, "$defs": defs})


def _policy(
    doc: Located, path: str, at: YamlPath, raw: dict[str, Any], issues: list[LoadIssue]
) -> PolicySpec:
    name: str = raw["name"]
    phases = tuple(Phase(p) for p in raw.get("phases", ["invocation"]))
    match = raw.get("match", {})
    match_expr = None
    if "expr" in match:
        match_at = (*at, "match", "expr")
        match_expr = ExprSpec(match["expr"], path, doc.sites[match_at], name, None)
    rules = tuple(
        _rule(doc, path, (*at, "rules", i), name, i, r, phases, issues)
        for i, r in enumerate(raw["rules"])
        if isinstance(r, dict) and isinstance(r.get("when"), str | bool) and r["when"] != ""
    )
    line, column = doc.position((*at, "name"))
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
        path=path,
        line=line,
        column=column,
    )


def _rule(
    doc: Located,
    path: str,
    at: YamlPath,
    policy: str,
    index: int,
    raw: dict[str, Any],
    phases: tuple[Phase, ...],
    issues: list[LoadIssue],
) -> RuleSpec:
    def issue(key: str, message: str) -> None:
        line, column = doc.key_position((*at, key))
        issues.append(LoadIssue(path, line, column, policy, index, message))

    when = raw["when"]
    text = ("true" if when else "false") if isinstance(when, bool) else when
    # A rule with schema errors is still type-checked, so its CEL problems show up too;
    # the set fails to load either way.
    label = raw.get("effect")
    valid_effect = label in _EFFECTS
    effect = Decision.from_label(label) if valid_effect else Decision.ALLOW
    if effect is Decision.REQUIRE_APPROVAL and phases == (Phase.EXECUTION,):
        issue("effect", "require-approval is not allowed in an execution-only policy")
    approval = None
    if "approval" in raw and _part_validator("approval").is_valid(raw["approval"]):
        if valid_effect and effect is not Decision.REQUIRE_APPROVAL:
            issue("approval", f"approval is only allowed with effect require-approval, not {label}")
        approval = _approval(raw["approval"], issue)
    site = doc.sites[(*at, "when")]
    return RuleSpec(index, ExprSpec(text, path, site, policy, index), effect, raw.get("message"), approval)


def _approval(raw: dict[str, Any], issue: Callable[[str, str], None]) -> ApprovalSpec:
    expires = None
    if "expires_in" in raw:
        try:
            expires = parse_duration(raw["expires_in"])
        except ValueError as exc:
            issue("approval", str(exc))
    roles = frozenset(raw.get("approvers", {}).get("roles", [DEFAULT_APPROVER_ROLE]))
    return ApprovalSpec(raw.get("reason"), roles, expires)
