"""The published schema: strict, documented, its defaults equal the dataclasses', docs in sync."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft7Validator

from gateway.config import config_schema, parse_duration
from gateway.config.docs import DOC, render_reference, splice
from gateway.config.settings import (
    ApprovalSettings,
    AuditSettings,
    Defaults,
    IdempotencySettings,
    JwtAuth,
    Listener,
    MtlsAuth,
    RedisSettings,
    TelemetrySettings,
    TrustedLocalAuth,
)
from gateway.model import ApprovalSpec, Capability, Limits, RetrySpec
from gateway.upstream.actor_token import ActorTokenSettings
from gateway.upstream.spec import Upstream

SCHEMA = config_schema()
DEFS = SCHEMA["definitions"]
ANNOTATIONS = {"description", "default"}
USER_SCHEMAS = {"input_schema", "output_schema"}  # JSON Schemas written by users: not ours


def objects(node: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with properties (the config's own mappings)."""
    if isinstance(node, dict):
        if "properties" in node:
            yield path, node
        for key, value in node.items():
            if key not in USER_SCHEMAS:
                yield from objects(value, f"{path}/{key}")


def test_the_schema_is_valid_draft_07():
    Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_every_mapping_is_strict_and_every_key_documented():
    for path, node in objects(SCHEMA):
        assert node.get("additionalProperties") is False, path
        for key, prop in node["properties"].items():
            target = DEFS[prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
            assert prop.get("description") or target.get("description"), f"{path}/{key}"


def test_refs_carry_only_annotations_since_draft_07_ignores_their_siblings():
    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                assert set(node) - {"$ref"} <= ANNOTATIONS, path
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}/{i}")

    walk(SCHEMA, "#")


# Each config mapping and the dataclass its keys build, with required fields filled in.
PAIRS: list[tuple[dict[str, Any], Any]] = [
    (DEFS["listener"], Listener(name="", address="", surface="")),
    (DEFS["jwt"], JwtAuth()),
    (DEFS["mtls"], MtlsAuth()),
    (DEFS["trusted_local"], TrustedLocalAuth()),
    (DEFS["upstream"], Upstream(name="", address="")),
    (
        DEFS["capability"],
        Capability(
            id="", description="", upstream="", method="", input_schema=None, output_schema=None
        ),
    ),
    (DEFS["retry"], RetrySpec()),
    (DEFS["approval"], ApprovalSpec()),
    (DEFS["limits"], Limits()),
    (SCHEMA["properties"]["redis"], RedisSettings()),
    (SCHEMA["properties"]["approvals"], ApprovalSettings()),
    (SCHEMA["properties"]["idempotency"], IdempotencySettings()),
    (SCHEMA["properties"]["audit"], AuditSettings()),
    (SCHEMA["properties"]["telemetry"], TelemetrySettings()),
    (SCHEMA["properties"]["actor_token"], ActorTokenSettings()),
    (SCHEMA["properties"]["defaults"], Defaults()),
]


def _as_field(prop: dict[str, Any], default: Any, key: str) -> tuple[str, Any]:
    if prop.get("$ref") == "#/definitions/duration":
        return f"{key}_s", parse_duration(default)
    if key == "socket_mode":
        return key, int(default, 8)
    if isinstance(default, list):
        return key, tuple(default)
    return key, default


@pytest.mark.parametrize(("schema", "instance"), PAIRS, ids=[type(p[1]).__name__ for p in PAIRS])
def test_documented_defaults_are_the_dataclass_defaults(schema, instance):
    checked = 0
    for key, prop in schema["properties"].items():
        if "default" not in prop:
            continue
        name, expected = _as_field(prop, prop["default"], key)
        actual = getattr(instance, name)
        if isinstance(actual, dict) or hasattr(actual, "keys"):
            actual = dict(actual)
        assert actual == expected, f"{type(instance).__name__}.{name}"
        checked += 1
    assert checked > 0


def test_docs_reference_is_generated_from_the_schema():
    current = DOC.read_text()
    assert splice(current, render_reference()) == current, (
        "docs/config.md is stale: run python -m gateway.config.docs"
    )


def test_every_schema_key_appears_in_the_docs():
    text = DOC.read_text()
    for _, node in objects(SCHEMA):
        for key in node["properties"]:
            assert f"| `{key}` |" in text, key
