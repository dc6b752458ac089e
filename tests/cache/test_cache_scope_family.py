"""The family of the comment that hid a read of `actor` (review of the cache scope check): CEL
texts built at random from real reads of actor fields and decoys that only look like reads
(string literals of every quoting, `//` comments with apostrophes and quotes in them, fields
named `actor` of other values). Every text compiles with cel-cpp, the mapping side never
misses a real read, and the key side never takes credit from a decoy. Seeded and bounded."""

from __future__ import annotations

import random

from cel_expr_python import cel

from gateway.config.cachescope import actor_names, actor_reads, reads_actor

FIELDS = [("id",), ("kind",), ("attributes", "customer"), ("attributes", "tenant"), ("roles",)]
DECOYS = [
    "'actor.id'",
    '"actor.attributes.customer"',
    "r'actor.kind\\n'",
    '"""actor.roles"""',
    "'''it's actor.id'''",
    "input.actor",
    "input.actor.id",
    "'// not a comment: actor.id'",
]
COMMENTS = [
    "// the caller's id\n",
    '// "actor.attributes.customer" is read below\n',
    "// it's actor.kind, isn't it\n",
    "// 'unbalanced\n",
]


def _read(path: tuple[str, ...], rng: random.Random) -> str:
    if len(path) == 2 and rng.random() < 0.3:
        return f"actor.{path[0]}['{path[1]}']"  # a plain literal index is that field
    return "actor." + ".".join(path)


def _text(rng: random.Random) -> tuple[str, set[tuple[str, ...]]]:
    """A CEL string expression, and the actor fields it really reads."""
    reads: set[tuple[str, ...]] = set()
    parts: list[str] = []
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.45:
            path = rng.choice(FIELDS)
            reads.add(path)
            parts.append(f"string({_read(path, rng)})")
        elif choice < 0.8:
            parts.append(f"string({rng.choice(DECOYS)})")
        else:
            parts.append("'x'")
    text = ""
    for i, part in enumerate(parts):
        if rng.random() < 0.5:
            text += rng.choice(COMMENTS)
        text += part if i == 0 else f" + {part}"
    if rng.random() < 0.5:
        text += "\n" + rng.choice(COMMENTS).rstrip("\n")
    return text, reads


def test_random_texts_with_decoys_are_read_as_cel_reads_them() -> None:
    env = cel.NewEnv(variables={"actor": cel.Type.DYN, "input": cel.Type.DYN})
    rng = random.Random(20261201)
    for _ in range(1500):
        text, reads = _text(rng)
        env.compile(text)  # real CEL: every generated text is one cel-cpp accepts
        found = actor_reads(text)
        assert reads <= found, (text, reads, found)
        assert found <= reads, (text, reads, found)  # no decoy counts as a read
        assert actor_names(text) == reads, text
        assert reads_actor(text) is bool(reads), text
