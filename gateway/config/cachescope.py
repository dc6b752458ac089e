"""Who shares a capability's cache entries (docs/cache.md): `actor` (the caller's issuer, id,
kind, roles, attributes and on_behalf_of, canonically hashed), `shared` (every caller), or a
CEL key expression over `actor`, `capability`, `request` and `surface` (e.g.
`actor.attributes.tenant`), type-checked at load to a string or an integer and compiled once.
It cannot read `input`: the validated input is in every key already."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from cel_expr_python import cel

from gateway.model import Actor, CacheSpec
from policy.backends.celexpr import call_variables
from policy.schematypes import CONTEXT_TYPES, TypeBuilder

__all__ = [
    "ScopeKey",
    "ScopeKeyError",
    "actor_names",
    "actor_reads",
    "actor_scope",
    "reads_actor",
    "uncovered_reads",
]

_VARIABLES: Final = ("actor", "capability", "request")
_KINDS: Final = (cel.Type.STRING, cel.Type.INT, cel.Type.UINT, cel.Type.DYN)


# CEL text, token by token: comments and string literals first, so that neither can hide a
# read of `actor` (an apostrophe in a comment) nor fake one (a comment or literal naming it).
_TOKEN: Final = re.compile(
    r"(?P<comment>//[^\n]*)"
    r"|(?P<string>(?:[rRbB]{1,2})?(?:'''.*?'''|\"\"\".*?\"\"\""
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"))"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.S,
)
_PLAIN_LITERAL: Final = re.compile(r"'([^'\\\n]*)'|\"([^\"\\\n]*)\"")

# One use of the variable `actor`: the fields read off it (`actor.attributes.customer` and
# `actor.attributes['customer']` are ("attributes", "customer")), and whether the path is used
# as a value as it is ("value") or only as the receiver of a method or macro ("call") or of
# an index that is not a plain literal ("index"). `actor` alone, `(actor).id`, is ().
_Use = tuple[tuple[str, ...], str]


def _tokens(expression: str) -> list[tuple[str, str]]:
    return [
        (m.lastgroup or "other", m.group())
        for m in _TOKEN.finditer(expression)
        if m.lastgroup not in ("comment", "space")
    ]


def _uses(expression: str) -> tuple[list[_Use], bool]:
    """Every use of `actor`, and whether a macro binds the name `actor` (`x.map(actor, ...)`),
    which makes any `actor` in the text possibly something else."""
    toks = _tokens(expression)
    uses: list[_Use] = []
    bound = False

    def at(i: int) -> tuple[str, str]:
        return toks[i] if 0 <= i < len(toks) else ("edge", "")

    for i, (kind, text) in enumerate(toks):
        if kind != "name" or text != "actor" or at(i - 1)[1] == ".":
            continue  # another name, or a field called actor (`input.actor`)
        if at(i - 1)[1] == "(" and at(i + 1)[1] == ",":
            bound = True
        path: list[str] = []
        j, how = i + 1, "value"
        while True:
            if at(j)[1] == "." and at(j + 1)[0] == "name":
                if at(j + 2)[1] == "(":
                    how = "call"
                    break
                path.append(at(j + 1)[1])
                j += 2
            elif at(j)[1] == "[":
                literal = (
                    _PLAIN_LITERAL.fullmatch(at(j + 1)[1]) if at(j + 1)[0] == "string" else None
                )
                if literal is None or at(j + 2)[1] != "]":
                    how = "index"
                    break
                path.append(literal.group(1) if literal.group(1) is not None else literal.group(2))
                j += 3
            else:
                break
        uses.append((tuple(path), how))
    return uses, bound


def reads_actor(expression: str) -> bool:
    """Whether a CEL text uses the `actor` variable (outside comments and string literals; a
    field named `actor`, as in `input.actor`, is not the variable). Any use counts."""
    return bool(_uses(expression)[0])


def actor_reads(expression: str) -> set[tuple[str, ...]]:
    """The parts of `actor` a CEL text may read, as field paths; () is the whole actor.
    Conservative: a method, macro or computed index reads the whole path it is applied to
    (`actor.roles.exists(...)` reads `roles`), and a macro binding the name `actor` makes the
    text read the whole actor."""
    uses, bound = _uses(expression)
    if bound:
        return {()}
    return {path for path, _ in uses}


def actor_names(expression: str) -> set[tuple[str, ...]]:
    """The actor fields a scope key certainly names: field paths used as values, never the
    receiver of a method or macro, a computed index, the whole actor, or anything in a text
    where a macro binds the name `actor`."""
    uses, bound = _uses(expression)
    if bound:
        return set()
    return {path for path, how in uses if how == "value" and path}


def uncovered_reads(mapper: str, key: str) -> list[str]:
    """The actor fields `mapper` may read that the scope key expression does not name (no
    field path the key uses as a value is the field or a part containing it), as dotted text,
    sorted: a cache keyed so would hand one caller's mapped request's answer to another. A
    key that names a field may still not tell callers apart by it; that the config cannot
    see (docs/cache.md)."""
    named = actor_names(key)
    missing = [
        path for path in actor_reads(mapper) if not any(path[: len(part)] == part for part in named)
    ]
    return sorted(".".join(("actor", *path)) for path in missing)


def actor_scope(actor: Actor) -> str:
    """The `actor` scope's value: the identity (issuer, id) and everything else of the actor a
    mapped request or a policy may read (roles, attributes, on_behalf_of), canonically hashed:
    two credentials of one subject with different attributes never share an entry."""
    canonical = json.dumps(
        [
            actor.issuer,
            actor.id,
            actor.kind,
            sorted(actor.roles),
            actor.attributes,
            actor.on_behalf_of,
        ],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return "actor:" + hashlib.sha256(canonical.encode()).hexdigest()


class ScopeKeyError(ValueError):
    """The key expression does not compile or is not a string or an integer (a load error)."""


class ScopeKey:
    """One capability's scope: `value(actor, bindings)` is the text its entries are keyed by,
    or None when the key expression failed for this call (the call then goes on uncached)."""

    __slots__ = ("_env", "_program", "kind")

    def __init__(self, spec: CacheSpec) -> None:
        self.kind = spec.scope
        self._program: Any = None
        self._env: Any = None
        if spec.scope != "key":
            return
        builder = TypeBuilder()
        typed: dict[str, Any] = {n: cel.Type(CONTEXT_TYPES[n]) for n in _VARIABLES}
        checker = cel.NewEnv(builder.pool, variables={**typed, "surface": cel.Type.STRING})
        try:
            result = checker.compile(spec.key).return_type()
        except RuntimeError as exc:
            first = str(exc).removeprefix("INVALID_ARGUMENT: ").splitlines()
            raise ScopeKeyError(f"cache.scope.key: {first[0] if first else exc}") from None
        if result not in _KINDS:
            raise ScopeKeyError(f"cache.scope.key must be a string or an int, not {result.name()}")
        dyn = dict.fromkeys(_VARIABLES, cel.Type.DYN)
        self._env = cel.NewEnv(variables={**dyn, "surface": cel.Type.STRING})
        self._program = self._env.compile(spec.key)

    @property
    def needs_bindings(self) -> bool:
        return self._program is not None

    def value(self, actor: Actor, bindings: Mapping[str, Any] | None) -> str | None:
        if self.kind == "shared":
            return ""
        if self.kind == "actor":
            return actor_scope(actor)
        assert bindings is not None
        activation = self._env.Activation(call_variables(bindings, (*_VARIABLES, "surface")))
        try:
            result = self._program.eval(activation)
        except RuntimeError:
            return None
        if result.type() == cel.Type.ERROR:
            return None  # e.g. the attribute is missing
        value = result.value()
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None  # an error, a missing attribute, a value of another type
        return f"{type(value).__name__}:{value}"
