"""The published JSON Schema of the config file, and validation that reports every violation.

`jsonschema` is used (not fastjsonschema, which stops at the first error) because a config check
must list every problem at once. Messages are written here from the failing keyword, never from
`jsonschema`'s own text, which quotes the offending value (possibly substituted from the
environment, §12).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, cast

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

from gateway.config.problems import PathParts

_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@functools.cache
def config_schema() -> dict[str, Any]:
    """The config JSON Schema (draft-07), as published in `gateway/config/schema/`."""
    text = resources.files("gateway.config").joinpath("schema/config.schema.json").read_text()
    return cast("dict[str, Any]", json.loads(text))


@functools.cache
def _validator() -> Draft7Validator:
    return Draft7Validator(config_schema())


def schema_problems(data: Any) -> list[tuple[PathParts, str]]:
    """Every schema violation in `data` as (path, message), deduplicated, in document order."""
    seen: set[tuple[PathParts, str]] = set()
    out: list[tuple[PathParts, str]] = []
    for error in _validator().iter_errors(data):
        for item in _describe(error):
            if item not in seen:
                seen.add(item)
                out.append(item)
    return out


def _describe(error: ValidationError) -> list[tuple[PathParts, str]]:
    path: PathParts = tuple(error.absolute_path)
    keyword, expected, schema = error.validator, error.validator_value, error.schema
    instance = error.instance
    if keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = sorted(schema.get("properties", {}))
        hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return [((*path, key), f"unknown key{hint}") for key in instance if key not in allowed]
    if keyword == "required" and isinstance(instance, dict):
        return [(path, f"missing required key '{key}'") for key in expected if key not in instance]
    if "propertyNames" in error.relative_schema_path and isinstance(instance, str):
        # The failing instance is a key, and keys are never substituted: safe to name.
        hint = schema.get("x-message", f"must match {schema.get('pattern', '')}")
        return [((*path, instance), f"key '{instance}' {hint}")]
    return [(path, _message(str(keyword), expected, schema))]


def _message(keyword: str, expected: Any, schema: dict[str, Any]) -> str:
    if keyword == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        return "must be " + " or ".join(_TYPE_NAMES.get(n, n) for n in names)
    if keyword == "enum":
        return "must be one of: " + ", ".join(str(v) for v in expected)
    if keyword == "const":
        return f"must be {expected}"
    if keyword == "pattern":
        return str(schema.get("x-message", f"must match {expected}"))
    if keyword == "minLength":
        return "must not be empty" if expected == 1 else f"must have at least {expected} characters"
    if keyword == "minItems":
        return f"must have at least {expected} item(s)"
    if keyword == "maxItems":
        return f"must have at most {expected} item(s)"
    if keyword == "uniqueItems":
        return "must not repeat items"
    if keyword == "minimum":
        return f"must be at least {expected}"
    if keyword == "maximum":
        return str(schema.get("x-message", f"must be at most {expected}"))
    return f"violates '{keyword}'"
