"""`-o/--output table|json|yaml`, the one output option of every command that prints records
(kubectl's vocabulary): table for people, json and yaml field by field for programs.

A list of records prints as JSON lines (one object per line, so `tail`-like streams and
`| head` work alike), as YAML documents separated by `---`, or as a table whose first row
names the columns."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

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


def record(data: Mapping[str, Any], output: str, out: TextIO) -> None:
    """One record as json (a line) or yaml (a document)."""
    if output == "yaml":
        out.write("---\n" + yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True))
    else:
        out.write(orjson.dumps(data).decode() + "\n")


def table(rows: Iterable[Sequence[str]], header: Sequence[str], out: TextIO) -> None:
    """Columns padded to their widest cell, the header first."""
    cells = [list(header), *[list(map(str, row)) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
