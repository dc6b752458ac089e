"""A small reader of the repository's Dockerfile (no Docker engine here): instructions grouped
by stage, with line continuations joined, comments dropped and build ARGs substituted."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.helm.chart import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buffer):
            continue  # comments, parser directives, blank lines (also inside continuations)
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        lines.append((start, buffer + stripped))
        buffer = ""
    assert not buffer, "the Dockerfile ends inside a line continuation"
    return lines


def parse(path: Path = DOCKERFILE) -> list[Stage]:
    """The stages of a Dockerfile, FROM lines resolved against the global ARG defaults."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in _logical_lines(path.read_text()):
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "ARG" and not stages:
            name, _, default = args.partition("=")
            global_args[name] = default
        elif keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args, flags=re.IGNORECASE)
            assert match, f"line {number}: cannot read FROM {args!r}"
            base = re.sub(
                r"\$\{(\w+)\}|\$(\w+)",
                lambda m: global_args[m.group(1) or m.group(2)],
                match.group(1),
            )
            stages.append(Stage(base=base, name=match.group(2)))
        else:
            assert stages, f"line {number}: {keyword} before the first FROM"
            stages[-1].instructions.append(Instruction(keyword, args, number))
    return stages


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON array of an exec-form instruction; fails on the shell form."""
    try:
        value = json.loads(instruction.args)
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"line {instruction.line}: {instruction.keyword} is not exec form"
        ) from exc
    assert isinstance(value, list)
    assert all(isinstance(v, str) for v in value)
    return value


def entrypoint(stage: Stage) -> list[str]:
    (last,) = stage.all("ENTRYPOINT")[-1:]
    return exec_form(last)


def ignored(relative: str, path: Path = DOCKERIGNORE) -> bool:
    """Whether the build context leaves `relative` out (Docker's rules: last match wins,
    `!` re-includes, a pattern matching a directory covers everything under it)."""
    excluded = False
    parts = Path(relative).parts
    for raw in path.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        if pattern.startswith("**/"):
            tail = pattern[3:]
            hit = any(fnmatch.fnmatchcase(part, tail) for part in parts)
        else:
            hit = any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes)
        if hit:
            excluded = not negate
    return excluded
