"""The public surface of gateway.config, pinned (STYLE: private by default)."""

from __future__ import annotations

import inspect

import gateway.config
from gateway.config import ConfigWatcher, Problem, load_settings


def test_public_names():
    assert sorted(gateway.config.__all__) == [
        "ConfigError",
        "ConfigWatcher",
        "Problem",
        "config_schema",
        "load_settings",
        "parse_duration",
    ]


def test_signatures():
    assert str(inspect.signature(load_settings)) == (
        "(path: 'str | Path', *, environ: 'Mapping[str, str] | None' = None) -> 'Settings'"
    )
    assert list(inspect.signature(ConfigWatcher).parameters) == [
        "path",
        "on_change",
        "on_error",
        "interval_s",
        "environ",
        "initial",
        "settle_s",
        "settle",
    ]
    assert list(Problem.__dataclass_fields__) == [
        "path_in_file",
        "line",
        "message",
        "file",
        "column",
    ]


def test_problem_renders_as_file_line_path_message():
    assert str(Problem("capabilities[2].expose", 14, "must be a mapping", "g.yaml")) == (
        "g.yaml:14: capabilities[2].expose: must be a mapping"
    )
    assert str(Problem("", None, "config file not found", "g.yaml")) == (
        "g.yaml: (root): config file not found"
    )
