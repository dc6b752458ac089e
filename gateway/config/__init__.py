"""The gateway config: load and validate YAML into `gateway.config.settings.Settings`, watch it for
reload.

    from gateway.config import load_settings, ConfigError
    settings = load_settings("capgate.yaml")          # raises ConfigError with every problem

The published JSON Schema is `config_schema()` (file `gateway/config/schema/config.schema.json`);
`docs/config.md` documents every key and is checked against it.
"""

from __future__ import annotations

from gateway.config.durations import parse_duration
from gateway.config.loader import load_settings
from gateway.config.problems import ConfigError, Problem
from gateway.config.schema import config_schema
from gateway.config.watch import ConfigWatcher

__all__ = [
    "ConfigError",
    "ConfigWatcher",
    "Problem",
    "config_schema",
    "load_settings",
    "parse_duration",
]
