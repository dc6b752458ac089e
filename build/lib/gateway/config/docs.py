"""The key reference in `docs/config.md`, generated from the published JSON Schema.

python -m gateway.config.docs           # rewrite the generated part of docs/config.md
python -m gateway.config.docs --check   # exit 1 when it is stale (a test runs the same)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gateway.config.schema import config_schema

BEGIN = "<!-- BEGIN GENERATED: config reference (python -m gateway.config.docs) -->"
END = "<!-- END GENERATED: config reference -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"
_NAMED = {
    "duration": "duration",
    "name": "name",
    "address": "address",
    "tcp_address": "host:port",
    "file": "path",
}


def render_reference(schema: dict[str, Any] | None = None) -> str:
    """Markdown: one table per mapping in the config, in schema order."""
    root = schema or config_schema()
    out: list[str] = []
    _section(root, root, "(top level)", out)
    return "\n".join(out).rstrip() + "\n"


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    target: dict[str, Any] = root["definitions"][ref.rsplit("/", 1)[1]]
    return target


def _type(root: dict[str, Any], node: dict[str, Any]) -> str:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[1] in _NAMED:
        return _NAMED[ref.rsplit("/", 1)[1]]
    node = _resolve(root, node)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(root, node.get('items', {}))}"
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return f"map of {_type(root, extra)}"
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(kind)
    return str(kind or "any")


def _child(root: dict[str, Any], node: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A nested mapping worth its own table: (path suffix, schema)."""
    target = _resolve(root, node)
    if target.get("type") == "object" and "properties" in target:
        return "", target
    if target.get("type") == "array":
        item = _resolve(root, target.get("items", {}))
        if item.get("type") == "object" and "properties" in item:
            return "[]", item
    extra = target.get("additionalProperties")
    if target.get("type") == "object" and isinstance(extra, dict):
        value = _resolve(root, extra)
        if value.get("type") == "object" and "properties" in value:
            return ".<name>", value
    return None


def _section(root: dict[str, Any], node: dict[str, Any], path: str, out: list[str]) -> None:
    out += [f"### `{path}`", ""]
    if node.get("description"):
        out += [node["description"], ""]
    out += ["| key | type | required | default | description |", "|---|---|---|---|---|"]
    required = set(node.get("required", ()))
    children: list[tuple[str, dict[str, Any]]] = []
    for key, prop in node["properties"].items():
        target = _resolve(root, prop)
        description = prop.get("description") or target.get("description", "")
        default = prop.get("default", target.get("default"))
        shown = "" if default is None else f"`{json.dumps(default)}`"
        cell = description.replace("|", "\\|").replace("\n", " ")
        mark = "yes" if key in required else ""
        out.append(f"| `{key}` | {_type(root, prop)} | {mark} | {shown} | {cell} |")
        child = _child(root, prop)
        if child is not None:
            prefix = "" if path == "(top level)" else f"{path}."
            children.append((f"{prefix}{key}{child[0]}", child[1]))
    out.append("")
    for child_path, child_node in children:
        _section(root, child_node, child_path, out)


def splice(document: str, reference: str) -> str:
    """`document` with the text between the markers replaced by `reference`."""
    head, _, rest = document.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{reference}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/config.md is stale")
    args = parser.parse_args(argv)
    current = DOC.read_text()
    wanted = splice(current, render_reference())
    if args.check:
        if current != wanted:
            print(f"{DOC} is stale: run python -m gateway.config.docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
