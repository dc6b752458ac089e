"""The type of the `hooks` variable: the gateway's pre-hooks' declared context attributes.

A gateway config declares, per hook, the attributes its PreInvoke may return and their JSON
types (`hooks[].context`, docs/hooks.md); policies read them as `hooks.<hook>.<attribute>`,
checked at load like `input` (an undeclared hook or attribute, or a type mismatch, is a load
error). `number` is `dyn` (JSON numbers arrive as ints or doubles), as in input schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.schematypes import TypeBuilder

__all__ = ["hooks_type"]


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def hooks_type(types: TypeBuilder, declared: Mapping[str, Mapping[str, str]]) -> str | None:
    """The message type of `hooks`; None when no hook declares an attribute (then `hooks` is
    not declared and a policy reading it fails to load)."""
    hooks = {
        hook: _closed({name: {"type": kind} for name, kind in attributes.items()})
        for hook, attributes in declared.items()
        if attributes
    }
    return types.record_type("Hooks", "hooks", _closed(hooks)) if hooks else None
