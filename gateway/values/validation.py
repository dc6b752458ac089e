"""Stage 5 and stage 12 schema validation, compiled once at load (STYLE principle 4).

The fast path is fastjsonschema (applies `default`s, producing the canonical value, SI-6). Only
when it fails does the slower full validator run, to report every issue at once. Issue messages
are built from the violated keyword and the schema, never from the offending value; the one
caller text an issue may carry is a property name in its path (an unexpected property), escaped
to printable ASCII and bounded in length (`path_segment`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import fastjsonschema
from jsonschema import Draft7Validator, ValidationError

from gateway.errors import InputIssue

_MAX_ISSUES = 20
UNEXPECTED_PROPERTY: Final = "is not an allowed property"


MAX_NAME_LENGTH: Final = 64  # characters of one property name said back in a path
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def path_segment(part: str | int) -> str:
    """One step of an issue path. Property names can be the caller's (an unexpected property,
    a key under `additionalProperties`): a plain name is `.name`; any other is a JSON string
    in brackets, escaped to printable ASCII (`["a.b"]`, `["\\u0000"]`), and a name longer than
    `MAX_NAME_LENGTH` characters is cut there and marked with `...` after the quote."""
    if isinstance(part, int):
        return f"[{part}]"
    if _PLAIN_NAME.fullmatch(part):
        return f".{part}"
    quoted = json.dumps(part[:MAX_NAME_LENGTH], ensure_ascii=True)
    return f"[{quoted}{'...' if len(part) > MAX_NAME_LENGTH else ''}]"


def pointer(path: Iterable[str | int]) -> str:
    return "$" + "".join(path_segment(part) for part in path)


def _unexpected(instance: Any, schema: Any) -> list[str]:
    """The properties of `instance` that `additionalProperties: false` in `schema` refuses
    (neither listed in `properties` nor matching a `patternProperties` pattern)."""
    if not isinstance(instance, dict) or not isinstance(schema, Mapping):
        return []
    listed = schema.get("properties")
    listed = listed if isinstance(listed, Mapping) else {}
    patterns = schema.get("patternProperties")
    patterns = list(patterns) if isinstance(patterns, Mapping) else []
    return [
        name
        for name in instance
        if name not in listed and not any(re.search(p, name) for p in patterns)
    ]


def _message(keyword: str, schema_value: Any) -> str:
    match keyword:
        case "type":
            return f"must be of type {schema_value}"
        case "required":
            return "is missing a required property"
        case "additionalProperties":
            return "has a property that is not allowed"
        case "enum":
            return "must be one of the allowed values"
        case "const":
            return "must equal the required constant"
        case "minimum" | "exclusiveMinimum":
            return f"must be {'>' if keyword == 'exclusiveMinimum' else '>='} {schema_value}"
        case "maximum" | "exclusiveMaximum":
            return f"must be {'<' if keyword == 'exclusiveMaximum' else '<='} {schema_value}"
        case "minLength" | "maxLength":
            return f"length must be {'>=' if keyword == 'minLength' else '<='} {schema_value}"
        case "minItems" | "maxItems":
            bound = "at least" if keyword == "minItems" else "at most"
            return f"must have {bound} {schema_value} items"
        case "pattern":
            return "does not match the required pattern"
        case "format":
            return f"must be a valid {schema_value}"
        case "multipleOf":
            return f"must be a multiple of {schema_value}"
        case _:
            return f"violates '{keyword}'"


def _issues_of(err: ValidationError) -> list[InputIssue]:
    path = list(err.absolute_path)
    if err.validator == "required":
        # The missing property's name comes from the schema, so it is safe to name it.
        instance = err.instance
        missing = [
            r for r in err.validator_value if isinstance(instance, dict) and r not in instance
        ]
        return [InputIssue(pointer([*path, name]), "is required") for name in missing]
    if err.validator == "additionalProperties" and err.validator_value is False:
        # The caller's own property names, escaped and bounded (path_segment); sorted so the
        # answer does not depend on the order they were sent in, and at most _MAX_ISSUES.
        extra = sorted(_unexpected(err.instance, err.schema))[:_MAX_ISSUES]
        if extra:
            return [InputIssue(pointer([*path, name]), UNEXPECTED_PROPERTY) for name in extra]
    return [InputIssue(pointer(path), _message(str(err.validator), err.validator_value))]


class SchemaValidator:
    """A compiled JSON Schema. `validate` returns the canonical value or the issues."""

    __slots__ = ("_fast", "_full", "schema")

    def __init__(self, schema: Mapping[str, Any]):
        self.schema = dict(schema)
        self._fast = fastjsonschema.compile(self.schema, use_formats=True)
        self._full = Draft7Validator(self.schema, format_checker=Draft7Validator.FORMAT_CHECKER)

    def validate(self, value: Any) -> tuple[Any, tuple[InputIssue, ...]]:
        # The value is fresh from the parser for this call; filling in defaults in place
        # avoids a copy on the hot path.
        try:
            return self._fast(value), ()
        except fastjsonschema.JsonSchemaValueException:
            pass
        issues: list[InputIssue] = []
        for err in sorted(self._full.iter_errors(value), key=lambda e: list(e.absolute_path)):
            issues.extend(_issues_of(err))
            if len(issues) >= _MAX_ISSUES:
                del issues[_MAX_ISSUES:]
                break
        if not issues:  # the two validators disagree: fail closed with a generic issue
            issues.append(InputIssue("$", "does not match the schema"))
        # jsonschema reports `required` once per missing name; keep each issue once, by path.
        return None, tuple(sorted(dict.fromkeys(issues), key=lambda i: (i.path, i.message)))
