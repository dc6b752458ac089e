"""The published JSON Schemas are valid and describe the files we ship."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from policy.schemacheck import load_schema

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILES = sorted(
    p
    for d in (ROOT / "examples" / "policies", Path(__file__).parent / "corpus")
    for p in d.glob("*.yaml")
    if not p.name.endswith("_test.yaml")
)
SUITES = sorted(
    p
    for d in (ROOT / "examples" / "policies", Path(__file__).parent / "corpus")
    for p in d.glob("*_test.yaml")
)


@pytest.mark.parametrize("name", ["policy-file.schema.json", "policy-test.schema.json"])
def test_the_schemas_are_valid_draft_2020_12(name):
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.name)
def test_shipped_policy_files_match_the_published_schema(path):
    validator = jsonschema.Draft202012Validator(load_schema("policy-file.schema.json"))

    assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == []


@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.name)
def test_shipped_suites_match_the_published_schema(path):
    validator = jsonschema.Draft202012Validator(load_schema("policy-test.schema.json"))

    assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == []


def test_the_schema_rejects_an_unknown_effect():
    validator = jsonschema.Draft202012Validator(load_schema("policy-file.schema.json"))
    document = {"policies": [{"name": "p", "rules": [{"when": "true", "effect": "permit"}]}]}

    (error,) = validator.iter_errors(document)

    assert list(error.absolute_path) == ["policies", 0, "rules", 0, "effect"]
