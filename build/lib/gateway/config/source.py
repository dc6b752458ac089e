"""Reading config YAML into plain data that remembers where every value came from.

PyYAML's composer keeps node marks, so the file is composed (never constructed) and turned into
`Located` dicts and lists that record the file and line of each key and item. Scalars follow the
YAML 1.2 core rules where YAML 1.1 surprises: only true/false are booleans (`expose: {agent: yes}`
stays a string and is refused, SI-1) and `1:30` is not a sexagesimal number.
A directory config is every `*.yaml` file in it, merged; hidden entries (Kubernetes' `..data`)
are skipped because the visible names already point into them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gateway.config.problems import PathParts, Problem, format_path

Loc = tuple[str, int]  # (file, 1-based line)

_SCALARS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
}
_AS_TEXT = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"}
# Aliases share nodes, so a few lines can expand exponentially ("billion laughs"); no real
# config comes near this many values.
MAX_NODES = 200_000


class _TooLarge(Exception):
    pass


class LDict(dict[str, Any]):
    """A mapping with the location of itself and of each key."""

    __slots__ = ("key_locs", "loc")

    def __init__(self, loc: Loc) -> None:
        super().__init__()
        self.loc = loc
        self.key_locs: dict[str, Loc] = {}


class LList(list[Any]):
    """A sequence with the location of itself and of each item."""

    __slots__ = ("item_locs", "loc")

    def __init__(self, loc: Loc) -> None:
        super().__init__()
        self.loc = loc
        self.item_locs: list[Loc] = []


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: Path
    data: bytes


def config_files(path: Path) -> list[Path]:
    """The files a config path stands for: the file itself, or the visible `*.yaml` in a dir."""
    if not path.is_dir():
        return [path]
    return sorted(
        p for p in path.iterdir() if not p.name.startswith(".") and p.name.endswith(".yaml")
    )


def locate(root: Any, parts: PathParts) -> Loc | None:
    """The location of the deepest existing node on `parts` (a missing key points at its parent)."""
    loc: Loc | None = getattr(root, "loc", None)
    node = root
    for part in parts:
        if isinstance(node, LDict) and isinstance(part, str) and part in node:
            loc, node = node.key_locs[part], node[part]
        elif isinstance(node, LList) and isinstance(part, int) and 0 <= part < len(node):
            loc, node = node.item_locs[part], node[part]
        else:
            break
    return loc


def problem_at(root: Any, parts: PathParts, message: str) -> Problem:
    loc = locate(root, parts)
    return Problem(format_path(parts), loc[1] if loc else None, message, loc[0] if loc else None)


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self._constructor = yaml.SafeLoader("")
        self._count = 0
        self._open: set[int] = set()

    def _loc(self, node: yaml.Node) -> Loc:
        return (self.file, node.start_mark.line + 1)

    def _fail(self, node: yaml.Node, parts: PathParts, message: str) -> None:
        self.problems.append(
            Problem(format_path(parts), node.start_mark.line + 1, message, self.file)
        )

    def build(self, node: yaml.Node, parts: PathParts) -> Any:
        self._count += 1
        if self._count > MAX_NODES:
            raise _TooLarge
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, parts)
        if id(node) in self._open:
            # An alias to an enclosing anchor (`a: &x [*x]`) would expand forever.
            self._fail(node, parts, "recursive YAML alias")
            return None
        self._open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, parts)
            seq = LList(self._loc(node))
            for i, item in enumerate(node.value):
                seq.append(self.build(item, (*parts, i)))
                seq.item_locs.append(self._loc(item))
            return seq
        finally:
            self._open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, parts: PathParts) -> LDict:
        out = LDict(self._loc(node))
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._fail(key_node, parts, "YAML merge keys (<<) are not supported")
                continue
            key = self._scalar(key_node, parts) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                self._fail(key_node, parts, "mapping keys must be strings")
                continue
            if key in out:
                first = out.key_locs[key][1]
                self._fail(
                    key_node, (*parts, key), f"duplicate key (first defined at line {first})"
                )
                continue
            out.key_locs[key] = self._loc(key_node)
            out[key] = self.build(value_node, (*parts, key))
        return out

    def _scalar(self, node: yaml.ScalarNode, parts: PathParts) -> Any:
        tag, text = node.tag, node.value
        if tag in _AS_TEXT or (tag == "tag:yaml.org,2002:int" and ":" in text):
            return text
        if tag == "tag:yaml.org,2002:bool" and text.lower() not in {"true", "false"}:
            return text
        if tag not in _SCALARS:
            self._fail(node, parts, f"unsupported YAML tag {tag}")
            return None
        return self._constructor.construct_object(node)


def parse(source: SourceFile, label: str) -> tuple[Any, list[Problem]]:
    """One file's located data (an empty file is an empty mapping) and its problems."""
    try:
        text = source.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem("", None, f"not UTF-8 text (byte {exc.start})", label)]
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return None, [Problem("", line, what, label)]
    except yaml.YAMLError:
        return None, [Problem("", None, "invalid YAML", label)]
    if node is None:
        return LDict((label, 1)), []
    builder = _Builder(label)
    try:
        return builder.build(node, ()), builder.problems
    except _TooLarge:
        return None, [Problem("", None, f"more than {MAX_NODES} values (alias expansion?)", label)]


def merge(into: LDict, other: LDict, parts: PathParts, problems: list[Problem]) -> None:
    """Merge `other` into `into`: mappings merge, lists concatenate, other repeats are errors."""
    for key, value in other.items():
        here = (*parts, key)
        if key not in into:
            into[key] = value
            into.key_locs[key] = other.key_locs[key]
            continue
        mine = into[key]
        if isinstance(mine, LDict) and isinstance(value, LDict):
            merge(mine, value, here, problems)
        elif isinstance(mine, LList) and isinstance(value, LList):
            mine.extend(value)
            mine.item_locs.extend(value.item_locs)
        else:
            first_file, first_line = into.key_locs[key]
            file, line = other.key_locs[key]
            message = f"duplicate key (first defined at {Path(first_file).name}:{first_line})"
            problems.append(Problem(format_path(here), line, message, file))
