"""CEL source text: the `const` spelling, compiler diagnostics and their file positions.

`const` is a reserved word in CEL, so `const.limit` cannot reach the parser as written.
We rename the identifier to `_cnst` — same length, so every column the compiler reports
still points at the author's text — and rename it back in messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy.document import ExprSpec
from policy.errors import LoadIssue

__all__ = ["CONST_VAR", "Diagnostic", "diagnostics", "issue_at", "rewrite_const"]

CONST_VAR = "_cnst"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_START = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?('''|\"\"\"|'|\")")
_DIAGNOSTIC = re.compile(r"ERROR: <input>:(\d+):(\d+): ([^\n]*)")


def rewrite_const(text: str) -> str:
    """Rename the identifier `const` (outside strings, comments and field names)."""
    out: list[str] = []
    i, n = 0, len(text)
    previous = ""
    while i < n:
        char = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        string = _STRING_START.match(text, i)
        if string:
            end = _string_end(text, string.end(), string.group(1), "r" in string.group(0).lower())
            out.append(text[i:end])
            i, previous = end, "'"
            continue
        ident = _IDENT.match(text, i)
        if ident:
            word = ident.group(0)
            out.append(CONST_VAR if word == "const" and previous != "." else word)
            i, previous = ident.end(), "a"
            continue
        out.append(char)
        if not char.isspace():
            previous = char
        i += 1
    return "".join(out)


def _string_end(text: str, start: int, quote: str, raw: bool) -> int:
    i = start
    while i < len(text):
        if not raw and text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if len(quote) == 1 and text[i] == "\n":
            return i
        i += 1
    return len(text)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One compiler message at a 1-based position inside the expression."""

    line: int
    column: int
    message: str


def diagnostics(error_text: str) -> list[Diagnostic]:
    """Parse cel-cpp's `ERROR: <input>:L:C: message` lines (there may be several)."""
    found = [
        Diagnostic(int(m.group(1)), int(m.group(2)), _tidy(m.group(3)))
        for m in _DIAGNOSTIC.finditer(error_text)
    ]
    return found or [Diagnostic(1, 1, _tidy(error_text.strip().splitlines()[0]))]


def _tidy(message: str) -> str:
    message = re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", message)
    message = message.replace(" (in container '')", "")
    return message.replace(CONST_VAR, "const")


def issue_at(expr: ExprSpec, line: int, column: int, message: str) -> LoadIssue:
    """A load issue at a position inside `expr`, mapped to the file."""
    file_line, file_column, exact = expr.site.locate(expr.text, line, column)
    if not exact and (line, column) != (1, 1):
        message = f"{message} (expression line {line}, column {column})"
    return LoadIssue(expr.path, file_line, file_column, expr.policy, expr.rule, message)
