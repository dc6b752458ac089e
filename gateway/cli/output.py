"""`-o/--output table|json|yaml`, the one output option of every command that prints records
(kubectl's vocabulary): table for people, json and yaml field by field for programs.

A list of records prints as JSON lines (one object per line, so `tail`-like streams and
`| head` work alike), or as YAML documents separated by `---`; tables are each command's own,
their first row naming the columns."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import IO, Any

import orjson
import yaml

OUTPUTS = ("table", "json", "yaml")


def add_output(
    p: argparse.ArgumentParser,
    default: Callable[[Any], Any] = lambda value: value,
    *,
    initial: str = "table",
    legacy_format: bool = False,
) -> None:
    """`-o/--output`; with `legacy_format`, the old `--format` spelling too (same choices)."""
    names = ["-o", "--output", "--format"] if legacy_format else ["-o", "--output"]
    p.add_argument(
        *names,
        dest="output",
        choices=OUTPUTS,
        default=default(initial),
        help=f"table, json or yaml (default {initial})",
    )


def record(data: Mapping[str, Any], output: str, out: IO[str]) -> None:
    """One record as json (a line) or yaml (a document)."""
    if output == "yaml":
        out.write("---\n" + yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True))
    else:
        out.write(orjson.dumps(data).decode() + "\n")
