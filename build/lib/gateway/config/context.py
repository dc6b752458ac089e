"""Shared state of the semantic checks: the located data, the config directory, the problems.

The checks run even when the schema already failed, so that one run reports everything; every
accessor here therefore tolerates values of the wrong type (the schema reports those).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config.durations import parse_duration
from gateway.config.problems import PathParts, Problem
from gateway.config.source import LDict, LList, problem_at

MAX_PORT = 65535


@dataclass
class Ctx:
    root: Any
    base: Path  # relative paths resolve against this directory
    problems: list[Problem] = field(default_factory=list)

    def fail(self, parts: PathParts, message: str) -> None:
        self.problems.append(problem_at(self.root, parts, message))

    def existing_file(self, node: Any, key: str | int, parts: PathParts) -> Path | None:
        """`node[key]` resolved against the config directory; a problem when it does not exist."""
        if isinstance(node, dict):
            value = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            value = node[key]
        else:
            value = None
        if not isinstance(value, str) or not value:
            return None
        path = resolve(self.base, value)
        if not path.exists():
            self.fail((*parts, key), f"file not found: {path}")
            return None
        return path

    def whole_seconds(self, node: Any, key: str, parts: PathParts) -> None:
        seconds = seconds_of(node, key)
        if seconds is not None and seconds != int(seconds):
            self.fail((*parts, key), "must be a whole number of seconds")

    def positive(self, node: Any, key: str, parts: PathParts) -> None:
        seconds = seconds_of(node, key)
        if seconds is not None and seconds <= 0:
            self.fail((*parts, key), "must be greater than 0")


def seconds_of(node: Any, key: str) -> float | None:
    """A duration value in seconds, or None when absent or malformed (the schema reports it)."""
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return parse_duration(value)
    except ValueError:
        return None


def resolve(base: Path, value: str) -> Path:
    """`value` against the config directory, normalized lexically: symlinks are not resolved,
    so a path inside a Kubernetes ConfigMap keeps following its `..data` swaps."""
    return Path(os.path.normpath(base / Path(value).expanduser()))


def mapping(value: Any) -> LDict:
    return value if isinstance(value, LDict) else LDict(("", 0))


def items(value: Any) -> list[tuple[int, LDict]]:
    """(index, mapping) for every mapping item of a list; other items are the schema's problem."""
    if not isinstance(value, LList):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, LDict)]


def text(node: Any, key: str, default: str = "") -> str:
    value = node.get(key, default) if isinstance(node, dict) else default
    return value if isinstance(value, str) else default


def plain(value: Any) -> Any:
    """Plain dicts and lists: what leaves the loader never holds the located subclasses."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def is_unix(address: str) -> bool:
    return address.startswith("unix:")


def check_port(ctx: Ctx, address: str, parts: PathParts) -> None:
    port = address.rpartition(":")[2]
    if address and not is_unix(address) and port.isdigit() and int(port) > MAX_PORT:
        ctx.fail(parts, f"port must be at most {MAX_PORT}")
