"""Checking YAML documents against the published JSON Schemas, with positions.

`policy/schema/policy-file.schema.json` is the single source of the policy-file shape
(editors validate with it too). Every violation becomes a `LoadIssue` located at the
offending value, or at the key itself for unknown fields.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from policy.errors import LoadIssue
from policy.yamlsource import Located, YamlPath

__all__ = ["load_schema", "part_validator", "policy_file_schema", "schema_issues"]


@cache
def load_schema(name: str) -> dict[str, Any]:
    """One of the published schemas in `policy/schema/`."""
    text = resources.files("policy").joinpath(f"schema/{name}").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def policy_file_schema() -> dict[str, Any]:
    """The published JSON Schema of policy files."""
    return load_schema("policy-file.schema.json")


@cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(schema_name))


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
    rule = (
        where[3] if len(where) > 3 and where[2] == "rules" and isinstance(where[3], int) else None
    )
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
                extra = (
                    f" (did you mean {hint[0]!r}?)" if hint else f"; allowed: {', '.join(known)}"
                )
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
    return [(where, f"{field}: {err.message}")]


_PATTERN_HINTS = {
    "name": "is not a valid name (letters, digits, '.', '_', '-'; at most 128)",
    "expires_in": "is not a duration like 90s, 15m or 1h30m",
    "escalate_after": "is not a duration like 90s, 15m or 1h30m",
    "constants": "is not a CEL identifier",
}


@cache
def part_validator(part: str) -> jsonschema.Draft202012Validator:
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
