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
    "actor_reads",
    "actor_scope",
    "reads_actor",
    "uncovered_reads",
]

_VARIABLES: Final = ("actor", "capability", "request")
_KINDS: Final = (cel.Type.STRING, cel.Type.INT, cel.Type.UINT, cel.Type.DYN)


# A string literal (triple, single or double quoted; a raw or bytes prefix stays outside and
# is harmless): left out before looking for `actor`, so a literal holding the word is no read.
_LITERAL: Final = re.compile(
    r"'''.*?'''" r'|""".*?"""' r"|'(?:\\.|[^'\\])*'" r'|"(?:\\.|[^"\\])*"',
    re.S,
)
_ACTOR: Final = re.compile(r"(?<![\w.])actor(?!\w)")


def reads_actor(expression: str) -> bool:
    """Whether a CEL text names the `actor` variable (outside string literals; a field named
    `actor`, as in `input.actor`, is not the variable). Conservative: any mention counts."""
    return _ACTOR.search(_LITERAL.sub("''", expression)) is not None


# `actor` and the dotted fields read off it: `actor.attributes.customer` is
# ("attributes", "customer"); anything else after the variable (`(actor).id`, `actor[...]`,
# `actor` alone) reads what came before it, at worst the whole actor, ().
_ACTOR_PATH: Final = re.compile(r"(?<![\w.])actor((?:\s*\.\s*[A-Za-z_]\w*)*)(?!\w)")
_SEGMENT: Final = re.compile(r"[A-Za-z_]\w*")


def actor_reads(expression: str) -> set[tuple[str, ...]]:
    """The parts of `actor` a CEL text reads, as field paths; () is the whole actor.
    Conservative: `has(actor.x)` reads `x`, and a path followed by an index or a call
    (`actor.attributes['k']`, `actor.roles.exists(...)`) reads the path before it."""
    text = _LITERAL.sub("''", expression)
    found: set[tuple[str, ...]] = set()
    for match in _ACTOR_PATH.finditer(text):
        path = tuple(_SEGMENT.findall(match.group(1)))
        if path and text[match.end() :].lstrip().startswith("("):
            path = path[:-1]  # a method call (`actor.id.startsWith(...)`): its receiver
        found.add(path)
    return found


def uncovered_reads(mapper: str, key: str) -> list[str]:
    """The actor fields `mapper` reads that the scope key expression never names (none of the
    key's actor paths is the field or a part containing it), as dotted text, sorted: a cache
    keyed so would hand one caller's mapped request's answer to another. A key that names a
    field may still not tell callers apart by it; that the config cannot see."""
    named = actor_reads(key)
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
