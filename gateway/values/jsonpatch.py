"""RFC 6902 JSON Patch: the difference between two JSON values, and applying one.

An approver's edit is shown to the requester and kept in the approval record's view as the patch
from the requester's input to the edited input (docs/approvals.md "Edits"). `diff` writes the
smallest obvious patch (object members added, removed or replaced one by one; arrays of equal
length compared item by item, otherwise replaced whole) with RFC 6901 pointers; `apply` runs a
patch of `add`, `remove` and `replace` operations (what `diff` writes) and checks that
`apply(a, diff(a, b)) == b`.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["apply", "diff", "lookup", "pointer", "tokens"]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer(tokens: list[str | int]) -> str:
    """The RFC 6901 pointer of a path of object keys and array indexes."""
    return "".join("/" + _escape(str(t)) for t in tokens)


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true/1 and 1/1.0 differ in type for a JSON reader of the patch.
    return type(a) is type(b) and a == b


def diff(before: Any, after: Any) -> list[dict[str, Any]]:
    """The operations turning `before` into `after` (both JSON values)."""
    ops: list[dict[str, Any]] = []
    _diff(before, after, [], ops)
    return ops


def _diff(a: Any, b: Any, at: list[str | int], ops: list[dict[str, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": pointer([*at, key])})
        for key, value in b.items():
            if key not in a:
                ops.append({"op": "add", "path": pointer([*at, key]), "value": value})
            else:
                _diff(a[key], value, [*at, key], ops)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, [*at, i], ops)
    elif not _same(a, b):
        ops.append({"op": "replace", "path": pointer(at), "value": b})


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"not a JSON pointer: {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def tokens(path: str) -> list[str]:
    """The reference tokens of RFC 6901 pointer `path` (ValueError when it is not one)."""
    return _tokens(path)


def lookup(document: Any, path: str, *, default: Any) -> Any:
    """The value at RFC 6901 pointer `path`, or `default` when there is none."""
    node = document
    for token in _tokens(path):
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            return default
    return node


def apply(document: Any, patch: list[dict[str, Any]]) -> Any:
    """`document` with `patch` applied (a copy); ValueError for an operation it cannot apply."""
    doc = copy.deepcopy(document)
    for op in patch:
        tokens = _tokens(op["path"])
        kind = op["op"]
        if not tokens:
            if kind not in ("replace", "add"):
                raise ValueError(f"cannot {kind} the whole document")
            doc = copy.deepcopy(op["value"])
            continue
        parent: Any = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            else:
                raise ValueError(f"unsupported operation {kind!r}")
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in parent:
                raise ValueError(f"replace of a missing member {op['path']!r}")
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[last]
        else:
            raise ValueError(f"unsupported operation {kind!r}")
    return doc
