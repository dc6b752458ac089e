"""YAML documents as plain values plus the file position of every node.

PyYAML's composer keeps marks on nodes; we walk the node tree once, build plain values
with the safe constructor and remember where each value (and each mapping key) starts,
so that schema and CEL errors can point at `file:line:column`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from policy.errors import LoadIssue

__all__ = ["Located", "ScalarSite", "YamlPath", "parse_documents"]

YamlPath = tuple[str | int, ...]
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"


@dataclass(frozen=True, slots=True)
class ScalarSite:
    """Where a scalar's text lives in the file, piece by piece.

    `segments` are the source stretches (line, column, length; 1-based) whose texts,
    joined by one separator character each (a space where YAML folds lines, a newline
    in `|` blocks), spell the value exactly. When no such mapping exists (escapes,
    blank lines in folded text) `segments` is empty and only the start is known.
    """

    line: int
    column: int
    segments: tuple[tuple[int, int, int], ...] = ()

    def locate(self, text: str, expr_line: int, expr_column: int) -> tuple[int, int, bool]:
        """File (line, column) of a 1-based position in `text` (the scalar's value)."""
        lines = text.split("\n")
        if not self.segments or expr_line > len(lines):
            return self.line, self.column, False
        offset = sum(len(line) + 1 for line in lines[: expr_line - 1]) + expr_column - 1
        for line, column, length in self.segments:
            if offset <= length:
                return line, column + offset, True
            offset -= length + 1
        return self.line, self.column, False


@dataclass(slots=True)
class Located:
    """One YAML document: its value and where each path in it came from (1-based)."""

    value: Any
    positions: dict[YamlPath, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[YamlPath, tuple[int, int]] = field(default_factory=dict)
    sites: dict[YamlPath, ScalarSite] = field(default_factory=dict)

    def position(self, path: YamlPath) -> tuple[int, int]:
        """The position of `path`, or of its nearest ancestor that has one."""
        for cut in range(len(path), -1, -1):
            found = self.positions.get(path[:cut])
            if found is not None:
                return found
        return (1, 1)

    def key_position(self, path: YamlPath) -> tuple[int, int]:
        """Where the mapping key of `path` is written (falls back to the value)."""
        return self.key_positions.get(path) or self.position(path)


def parse_documents(path: str, text: str) -> tuple[list[Located], list[LoadIssue]]:
    """Every document of a YAML stream, or the syntax issues that stopped parsing."""
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return [], [LoadIssue(path, line, column, None, None, f"YAML syntax error: {problem}")]
    except yaml.YAMLError as exc:
        return [], [LoadIssue(path, 1, 1, None, None, f"YAML error: {exc}")]
    walker = _Walker(path, text.splitlines())
    docs = [walker.document(node) for node in nodes if node is not None]
    return docs, walker.issues


class _Walker:
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.issues: list[LoadIssue] = []
        self.constructor = SafeConstructor()

    def document(self, node: yaml.Node) -> Located:
        doc = Located(value=None)
        doc.value = self._value(node, (), doc, frozenset())
        return doc

    def _issue(self, node: yaml.Node, message: str) -> None:
        mark = node.start_mark
        self.issues.append(
            LoadIssue(self.path, mark.line + 1, mark.column + 1, None, None, message)
        )

    def _value(self, node: yaml.Node, path: YamlPath, doc: Located, seen: frozenset[int]) -> Any:
        doc.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if id(node) in seen:
            self._issue(node, "recursive YAML aliases are not supported")
            return None
        if isinstance(node, yaml.ScalarNode):
            doc.sites[path] = self._site(node)
            if node.tag == _TIMESTAMP_TAG:
                return node.value  # timestamps stay text; CEL spells them timestamp('...')
            if node.tag == _BOOL_TAG and node.value.lower() not in {"true", "false"}:
                return node.value  # YAML 1.1's yes/no/on/off stay text, as in the gateway config
            return self.constructor.construct_object(node, deep=True)
        inner = seen | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            return [self._value(item, (*path, i), doc, inner) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, doc, inner)
        self._issue(node, "unsupported YAML node")
        return None

    def _mapping(
        self, node: yaml.MappingNode, path: YamlPath, doc: Located, seen: frozenset[int]
    ) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._issue(key_node, "YAML merge keys (<<) are not supported")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._issue(key_node, "mapping keys must be plain scalars")
                continue
            key = self.constructor.construct_object(key_node)
            if isinstance(key, int | float | bool) or key is None:
                key = key_node.value
            if key in out:
                self._issue(key_node, f"duplicate key {key!r}")
                continue
            child = (*path, key)
            doc.key_positions[child] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
            out[key] = self._value(value_node, child, doc, seen)
        return out

    def _site(self, node: yaml.ScalarNode) -> ScalarSite:
        quoted = int(node.style in {"'", '"'})
        start = node.start_mark
        segments = self._segments(node, quoted)
        if segments:
            return ScalarSite(segments[0][0], segments[0][1], segments)
        return ScalarSite(start.line + 1, start.column + 1 + quoted)

    def _segments(self, node: yaml.ScalarNode, quoted: int) -> tuple[tuple[int, int, int], ...]:
        """Source stretches spelling the value, or () when they do not (see ScalarSite)."""
        start, end = node.start_mark, node.end_mark
        value = node.value
        if node.style in {"|", ">"}:
            pieces = self._block_lines(start.line + 1)
            value = value.rstrip("\n")
        elif start.line == end.line:
            text = self.lines[start.line][start.column + quoted : end.column - quoted]
            pieces = [(start.line, start.column + quoted, text)]
        elif node.style is None:
            pieces = self._plain_lines(start.line, start.column, end.line, end.column)
        else:
            return ()  # multi-line quoted scalars fold escapes and spaces: no exact map
        joiner = "\n" if node.style == "|" else " "
        if not pieces or joiner.join(p[2] for p in pieces) != value:
            return ()
        return tuple((line + 1, column + 1, len(text)) for line, column, text in pieces)

    def _plain_lines(
        self, first: int, first_column: int, last: int, last_column: int
    ) -> list[tuple[int, int, str]]:
        """A multi-line plain scalar's lines, each stripped (YAML folds them with spaces)."""
        pieces = []
        for index in range(first, last + 1):
            line = self.lines[index]
            offset = first_column if index == first else 0
            text = line[offset : last_column if index == last else None]
            stripped = text.strip()
            pieces.append((index, offset + len(text) - len(text.lstrip()), stripped))
        return pieces

    def _block_lines(self, first: int) -> list[tuple[int, int, str]]:
        """The body of a block scalar starting at 0-based line `first`, indentation removed."""
        body = [i for i in range(first, len(self.lines)) if self.lines[i].strip()]
        if not body:
            return []
        indent = _indent(self.lines[body[0]])
        pieces: list[tuple[int, int, str]] = []
        for index in range(first, len(self.lines)):
            line = self.lines[index]
            if line.strip() and _indent(line) < indent:
                break
            pieces.append((index, indent, line[indent:]))
        while pieces and not pieces[-1][2].strip():
            pieces.pop()
        return pieces


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
