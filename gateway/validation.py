"""Stage 5 and stage 12 schema validation, compiled once at load (STYLE principle 4).

The fast path is fastjsonschema (applies `default`s, producing the canonical value, SI-6). Only
when it fails does the slower full validator run, to report every issue at once. Issue messages
are built from the violated keyword and the schema, never from the offending value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fastjsonschema
from jsonschema import Draft7Validator

from gateway.errors import InputIssue

_MAX_ISSUES = 20


def _pointer(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


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
            path = list(err.absolute_path)
            if err.validator == "required":
                # The missing property's name comes from the schema, so it is safe to name it.
                missing = [
                    r
                    for r in err.validator_value
                    if isinstance(err.instance, dict) and r not in err.instance
                ]
                for name in missing:
                    issues.append(InputIssue(_pointer([*path, name]), "is required"))
                continue
            issues.append(
                InputIssue(_pointer(path), _message(str(err.validator), err.validator_value))
            )
            if len(issues) >= _MAX_ISSUES:
                break
        if not issues:  # the two validators disagree: fail closed with a generic issue
            issues.append(InputIssue("$", "does not match the schema"))
        # jsonschema reports `required` once per missing name; keep each issue once, by path.
        return None, tuple(sorted(dict.fromkeys(issues), key=lambda i: (i.path, i.message)))
