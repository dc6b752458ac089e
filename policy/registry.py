"""The capability registry as the policy engine sees it, read from a gateway config.

The `capabilities:` list is read (`id`, `tags`, `side_effect`, `risk`, `policies`,
`input_schema`), and `upstreams:` only to hand a capability's upstream to `derive_input`;
every other key of the config belongs to the gateway and is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from policy.errors import LoadIssue
from policy.files import read_sources
from policy.yamlsource import parse_documents

__all__ = ["InputDeriver", "hooks_from_config", "registry_from_config", "unknown_listed_policies"]

_KEYS = ("tags", "side_effect", "risk", "policies", "input_schema")

InputDeriver = Callable[[Mapping[str, Any], Mapping[str, Any], Path], Mapping[str, Any] | None]
"""(capability, its upstream's config or {}, the config's directory) → the input schema of a
capability that gives none (the gateway derives it from the protobuf request message), or None
when it cannot be known here (then `input` stays `dyn` for it)."""


def registry_from_config(
    path: Path, *, derive_input: InputDeriver | None = None
) -> dict[str, dict[str, Any]]:
    """Capability id → `{tags, side_effect, risk, policies, input_schema?}` from a config
    file or dir.

    Raises ValueError when the config cannot be read or its capabilities are malformed.
    """
    sources = read_sources(path) if path.is_dir() else read_sources([path])
    base = path if path.is_dir() else path.parent
    entries: list[Mapping[str, Any]] = []
    upstreams: dict[str, Any] = {}
    for source in sources:
        if source.data is None:
            raise ValueError(f"{source.label}: cannot read: {source.error}")
        try:
            documents = list(yaml.safe_load_all(source.data))
        except yaml.YAMLError as exc:
            raise ValueError(f"{source.label}: invalid YAML: {exc}") from None
        for document in documents:
            if not isinstance(document, Mapping):
                continue
            found = document.get("upstreams")
            if isinstance(found, Mapping):
                upstreams.update(found)
            entries += _capabilities(document, source.label)
    registry: dict[str, dict[str, Any]] = {}
    for entry in entries:
        known = {k: entry[k] for k in _KEYS if entry.get(k) is not None}
        if "input_schema" not in known and derive_input is not None:
            upstream = upstreams.get(str(entry.get("upstream")))
            schema = derive_input(entry, upstream if isinstance(upstream, Mapping) else {}, base)
            if schema is not None:
                known["input_schema"] = dict(schema)
        registry[entry["id"]] = known
    return registry


def hooks_from_config(path: Path) -> dict[str, dict[str, str]]:
    """Hook name → its declared context attributes and their types (`hooks[].context` of the
    pre_invoke hooks), which policies read as `hooks.<name>.<attribute>` (docs/hooks.md).
    Malformed entries are skipped: the gateway's own config check reports them."""
    sources = read_sources(path) if path.is_dir() else read_sources([path])
    found: dict[str, dict[str, str]] = {}
    for source in sources:
        try:
            documents = list(yaml.safe_load_all(source.data or b""))
        except yaml.YAMLError:
            continue  # registry_from_config reports it
        for document in documents:
            hooks = document.get("hooks") if isinstance(document, Mapping) else None
            for hook in hooks if isinstance(hooks, list) else ():
                if not isinstance(hook, Mapping) or not isinstance(hook.get("name"), str):
                    continue
                calls, context = hook.get("calls"), hook.get("context")
                if isinstance(calls, list) and "pre_invoke" in calls:
                    attrs = context if isinstance(context, Mapping) else {}
                    found[hook["name"]] = {str(k): str(v) for k, v in attrs.items()}
    return found


def _capabilities(document: Mapping[str, Any], label: str) -> list[Mapping[str, Any]]:
    capabilities = document.get("capabilities", [])
    if not isinstance(capabilities, list):
        raise ValueError(f"{label}: capabilities must be a list")
    for entry in capabilities:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            raise ValueError(f"{label}: every capability needs a string id")
        schema = entry.get("input_schema")
        if schema is not None and not isinstance(schema, Mapping):
            raise ValueError(f"{label}: {entry['id']}: input_schema must be an object")
        policies = entry.get("policies")
        if policies is not None and not (
            isinstance(policies, list) and all(isinstance(p, str) for p in policies)
        ):
            raise ValueError(f"{label}: {entry['id']}: policies must be a list of names")
    return capabilities


def unknown_listed_policies(path: Path, known: Collection[str]) -> list[LoadIssue]:
    """A located issue for every name in a config's `capabilities[].policies` that is not in
    `known` (the gateway refuses such a config; `policy check --config` says so first)."""
    sources = read_sources(path) if path.is_dir() else read_sources([path])
    issues: list[LoadIssue] = []
    for source in sources:
        if source.data is None:
            continue  # registry_from_config reports it
        docs, _ = parse_documents(source.label, source.data.decode("utf-8", "replace"))
        for doc in docs:
            capabilities = doc.value.get("capabilities") if isinstance(doc.value, dict) else None
            for i, entry in enumerate(capabilities if isinstance(capabilities, list) else ()):
                listed = entry.get("policies") if isinstance(entry, dict) else None
                for j, name in enumerate(listed if isinstance(listed, list) else ()):
                    if isinstance(name, str) and name not in known:
                        line, column = doc.position(("capabilities", i, "policies", j))
                        message = (
                            f"capabilities[{i}] ({entry.get('id')}) lists policy {name!r}, "
                            "which no policy file defines"
                        )
                        issues.append(LoadIssue(source.label, line, column, None, None, message))
    return issues
