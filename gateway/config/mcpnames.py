"""MCP tool names: which capability a tool name means, decided once per config.

A tool name is the configured `tool_names[capability_id]`, else the capability id with every
character outside `[A-Za-z0-9_-]` replaced by `_` (`orders.refund` -> `orders_refund`). Names
match `^[A-Za-z0-9_-]{1,64}$`: the MCP guidance also allows dots, but common model APIs refuse
them. Two capabilities with one name, or a capability named like the gateway's own approval
tool, is a load error (ADR 0010): a name must never resolve to a capability other than the one
the model was shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

APPROVAL_TOOL: Final = "capgate_approval_status"
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OUTSIDE: Final = re.compile(r"[^A-Za-z0-9_-]")


def default_tool_name(capability_id: str) -> str:
    """The deterministic default: dots (and anything else outside the pattern) become `_`."""
    return _OUTSIDE.sub("_", capability_id)[:64]


def tool_name(capability_id: str, mapping: Mapping[str, str]) -> str:
    return mapping.get(capability_id) or default_tool_name(capability_id)


@dataclass(frozen=True, slots=True)
class ToolTable:
    """Tool name <-> capability id for one listener and one capability set."""

    by_name: Mapping[str, str]
    by_capability: Mapping[str, str]

    def capability(self, name: str) -> str | None:
        return self.by_name.get(name)

    def name(self, capability_id: str) -> str | None:
        return self.by_capability.get(capability_id)


def build_table(
    capability_ids: Iterable[str], mapping: Mapping[str, str], *, approval_tool: bool
) -> tuple[ToolTable, list[str]]:
    """The table of `capability_ids` and every clash, sorted. A clashing capability gets no
    name at all, so a name never means the wrong capability: config checks refuse any clash;
    at run time (a reload racing a listener change) the clashing tools are left out."""
    names: dict[str, list[str]] = {}
    for cap_id in capability_ids:
        names.setdefault(tool_name(cap_id, mapping), []).append(cap_id)
    clashes: list[str] = []
    by_name: dict[str, str] = {}
    for name, owners in names.items():
        if approval_tool and name == APPROVAL_TOOL:
            clashes.extend(f"{c} takes the reserved tool name {APPROVAL_TOOL}" for c in owners)
        elif len(owners) > 1:
            clashes.append(f"{', '.join(sorted(owners))} share the tool name {name}")
        else:
            by_name[name] = owners[0]
    table = ToolTable(by_name=by_name, by_capability={c: n for n, c in by_name.items()})
    return table, sorted(clashes)
