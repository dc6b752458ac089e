"""Caller-controlled text made honest to read: invisible and bidi characters shown as escapes.

An input such as `'Refund to account \\u202e9876-5432\\u202c'` renders as "2345-6789" when the
right-to-left override is left to the browser; a zero-width space splits a word nobody sees
split. Every template filter that shows caller-controlled text (`shown`, `plain`) goes through
`reveal`: each such character becomes its `\\uXXXX` escape (in a marked span on pages), and the
field is flagged "contains invisible characters".

Revealed: bidi controls (U+061C, U+200E/200F, U+202A to 202E, U+2066 to 2069), every format
character (category Cf: zero-width space and joiners, U+2060 to 2064, U+FEFF, soft hyphen, tags),
control characters (Cc) except newline and tab, line and paragraph separators (Zl, Zp),
surrogates, private-use and unassigned code points, and blank-looking letters and marks
(Hangul fillers, U+3164, U+FFA0, U+2800, U+034F, U+17B4/17B5, variation selectors).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Final

from markupsafe import Markup, escape

FLAG: Final = "contains invisible characters"
_KEPT: Final = frozenset("\n\t")
_CATEGORIES: Final = frozenset({"Cf", "Cc", "Cs", "Co", "Cn", "Zl", "Zp"})
_BLANK: Final = frozenset(
    (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800, *range(0xFE00, 0xFE10))
) | frozenset(range(0xE0100, 0xE01F0))


def invisible(char: str) -> bool:
    """Whether `char` hides or reorders text instead of showing itself."""
    if char in _KEPT:
        return False
    return unicodedata.category(char) in _CATEGORIES or ord(char) in _BLANK


def escape_of(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def reveal(text: str) -> Iterator[tuple[str, bool]]:
    """`text` as runs: (visible text, False) and (an invisible character's escape, True)."""
    run: list[str] = []
    for char in text:
        if invisible(char):
            if run:
                yield "".join(run), False
                run = []
            yield escape_of(char), True
        else:
            run.append(char)
    if run:
        yield "".join(run), False


def has_invisible(text: str) -> bool:
    return any(invisible(c) for c in text)


def plain(value: object) -> str:
    """Text for places that take no markup (titles, attributes): escapes inline, a flag after."""
    text = "" if value is None else str(value)
    if not has_invisible(text):
        return text
    return "".join(part for part, _ in reveal(text)) + f" [{FLAG}]"


def shown(value: object) -> Markup:
    """HTML for page text: visible runs escaped, each invisible character as its escape in a
    `span.invisible` (its name in the title), and a `span.invisible-flag` after the field."""
    text = "" if value is None else str(value)
    if not has_invisible(text):
        return escape(text)
    out: list[str] = []
    for part, hidden in reveal(text):
        if hidden:
            name = _name(part)
            out.append(f'<span class="invisible" title="{escape(name)}">{escape(part)}</span>')
        else:
            out.append(str(escape(part)))
    out.append(f' <span class="invisible-flag">{FLAG}</span>')
    return Markup("".join(out))  # noqa: S704 - built from escaped parts only


def _name(escaped: str) -> str:
    code = int(escaped[2:], 16)
    try:
        return f"U+{code:04X} {unicodedata.name(chr(code))}"
    except ValueError:
        return f"U+{code:04X}"
