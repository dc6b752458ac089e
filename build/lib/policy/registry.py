"""The capability registry as the policy engine sees it, read from a gateway config.

Only the `capabilities:` list is read (`id`, `tags`, `side_effect`, `risk`,
`input_schema`); every other key of the config belongs to the gateway and is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from policy.files import read_sources

__all__ = ["registry_from_config"]

_KEYS = ("tags", "side_effect", "risk", "input_schema")


def registry_from_config(path: Path) -> dict[str, dict[str, Any]]:
    """Capability id → `{tags, side_effect, risk, input_schema?}` from a config file or dir.

    Raises ValueError when the config cannot be read or its capabilities are malformed.
    """
    sources = read_sources(path) if path.is_dir() else read_sources([path])
    registry: dict[str, dict[str, Any]] = {}
    for source in sources:
        if source.data is None:
            raise ValueError(f"{source.label}: cannot read: {source.error}")
        try:
            documents = list(yaml.safe_load_all(source.data))
        except yaml.YAMLError as exc:
            raise ValueError(f"{source.label}: invalid YAML: {exc}") from None
        for document in documents:
            capabilities = document.get("capabilities", []) if isinstance(document, Mapping) else []
            if not isinstance(capabilities, list):
                raise ValueError(f"{source.label}: capabilities must be a list")
            for entry in capabilities:
                if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
                    raise ValueError(f"{source.label}: every capability needs a string id")
                schema = entry.get("input_schema")
                if schema is not None and not isinstance(schema, Mapping):
                    raise ValueError(
                        f"{source.label}: {entry['id']}: input_schema must be an object"
                    )
                registry[entry["id"]] = {k: entry[k] for k in _KEYS if entry.get(k) is not None}
    return registry
