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


class ToolNameCollision(ValueError):
    """Two capabilities (or a capability and the approval tool) share one tool name."""


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
) -> ToolTable:
    """The table of `capability_ids`; `ToolNameCollision` names every clash, sorted."""
    by_name: dict[str, str] = {}
    clashes: list[str] = []
    for cap_id in capability_ids:
        name = tool_name(cap_id, mapping)
        if approval_tool and name == APPROVAL_TOOL:
            clashes.append(f"{cap_id} takes the reserved tool name {APPROVAL_TOOL}")
        elif name in by_name:
            first, second = sorted((by_name[name], cap_id))
            clashes.append(f"{first} and {second} both have the tool name {name}")
        else:
            by_name[name] = cap_id
    if clashes:
        raise ToolNameCollision("; ".join(sorted(clashes)))
    return ToolTable(by_name=by_name, by_capability={c: n for n, c in by_name.items()})
