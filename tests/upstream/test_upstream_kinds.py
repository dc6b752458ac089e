"""Issue 26: one place maps an upstream kind to its implementation (gateway/upstream/targets.py)."""

from __future__ import annotations

import json
from importlib import resources

from gateway.upstream.targets import KINDS


def test_every_kind_the_config_accepts_has_exactly_one_implementation() -> None:
    schema = json.loads(
        resources.files("gateway.config").joinpath("schema/config.schema.json").read_text()
    )
    kinds = schema["definitions"]["upstream"]["properties"]["kind"]["enum"]
    assert sorted(KINDS) == sorted(kinds)
