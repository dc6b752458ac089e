"""Turning cel-cpp's checker messages into messages about the policy author's text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policy.celsource import Diagnostic, issue_at
from policy.document import ExprSpec
from policy.errors import LoadIssue

__all__ = ["MATCH_CONTEXT", "Variant", "explain"]

MATCH_CONTEXT = "match"
"""The checking context of `match.expr`: every variable but `input` and `approval`."""

_UNDEFINED_FIELD = re.compile(r"undefined field '([^']+)' not found in struct '([^']+)'")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")
_TYPE_NAME = re.compile(r"capgate\.check\.[A-Za-z0-9_.]+")
_SHOWN = 5  # capability ids named in an input-field error
_VARIABLE_HOME = {
    "input": "invocation and execution phases (in a rule's `when`)",
    "approval": "execution phase (in a rule's `when`)",
}


@dataclass(frozen=True, slots=True)
class Variant:
    """One distinct input type (`type_name` None: dyn) and the capabilities sharing it."""

    key: str
    type_name: str | None
    capabilities: tuple[str, ...]


def explain(
    expr: ExprSpec,
    context: str,
    failures: Sequence[tuple[Variant, list[Diagnostic]]],
    labels: Mapping[str, str],
) -> list[LoadIssue]:
    """Issues for an expression that no input type accepted, from the closest attempt."""
    variant, closest = min(failures, key=lambda failure: len(failure[1]))
    # cel-cpp also reports what follows from an error ("type '*error*' cannot be ...").
    primary = [d for d in closest if "*error*" not in d.message] or closest
    missing_everywhere = set.intersection(*(_undefined(diags, labels) for _, diags in failures))
    checked = sorted({c for v, _ in failures for c in v.capabilities})
    out = []
    for diag in primary:
        message = _message(diag.message, context, labels)
        undefined = _UNDEFINED_FIELD.search(diag.message)
        if undefined and message.startswith("input"):
            message = _input_field(message, missing_everywhere, variant, checked)
        out.append(issue_at(expr, diag.line, diag.column, message))
    return out


def _undefined(diagnostics: list[Diagnostic], labels: Mapping[str, str]) -> set[str]:
    found = (_UNDEFINED_FIELD.search(d.message) for d in diagnostics)
    return {f"{labels.get(m.group(2), m.group(2))}.{m.group(1)}" for m in found if m}


def _input_field(path: str, everywhere: set[str], variant: Variant, checked: list[str]) -> str:
    shown = ", ".join(checked[:_SHOWN])
    more = f" and {len(checked) - _SHOWN} more" if len(checked) > _SHOWN else ""
    if path in everywhere:
        return f"no matched capability's input schema has {path} (checked: {shown}{more})"
    return (
        f"{path} is not in the input schema of {', '.join(variant.capabilities[:_SHOWN])}, and no "
        f"matched capability has every input field this uses (checked: {shown}{more})"
    )


def _message(message: str, context: str, labels: Mapping[str, str]) -> str:
    undeclared = _UNDECLARED.search(message)
    if undeclared:
        name = undeclared.group(1).split(".")[0]
        if name in _VARIABLE_HOME:
            where = "match.expr" if context == MATCH_CONTEXT else f"the {context} phase"
            return f"`{name}` is not bound in {where}; it exists in the {_VARIABLE_HOME[name]}"
        if name == "const":
            return "no constants are defined (add a top-level `constants:` mapping)"
        return (
            f"unknown variable {name!r} (variables: actor, capability, surface, request, "
            "input, approval, const)"
        )
    undefined = _UNDEFINED_FIELD.search(message)
    if undefined:
        field, owner = undefined.groups()
        label = labels.get(owner, owner)
        return (
            f"{label}.{field}" if label.startswith("input") else f"{label} has no field {field!r}"
        )
    message = message.replace("google.protobuf.Timestamp", "timestamp")
    return _TYPE_NAME.sub(lambda m: labels.get(m.group(0), m.group(0)), message)
