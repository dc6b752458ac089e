"""`gateway.inbox.reveal`: every invisible or bidi character becomes a visible escape, nothing
else changes, and markup stays escaped — checked on named cases and on seeded random text over
all of Unicode (a fixed number of draws, so the run is bounded)."""

from __future__ import annotations

import random
import re
import sys
import unicodedata

from markupsafe import Markup

from gateway.inbox.reveal import FLAG, invisible, plain, reveal, shown
from gateway.inbox.web import templates

BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
OTHER = [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x0000, 0x001B, 0x007F, 0x2028]
OTHER += [0x3164, 0xFE0F, 0xE0041, 0xE000, 0x0378, 0xD800]


def test_the_issues_example_reads_as_written() -> None:
    text = "Refund to account \u202e9876-5432\u202c"
    assert plain(text) == f"Refund to account \\u202e9876-5432\\u202c [{FLAG}]"
    html = str(shown(text))
    assert "\u202e" not in html
    assert "\u202c" not in html
    assert '<span class="invisible" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>' in html
    assert html.endswith(f'<span class="invisible-flag">{FLAG}</span>')


def test_every_named_invisible_character_is_revealed_and_ordinary_text_is_not() -> None:
    for code in BIDI + OTHER:
        char = chr(code)
        assert invisible(char), hex(code)
        assert char not in plain(f"a{char}b")
        assert FLAG in plain(f"a{char}b")
    for ordinary in ("plain", "naïve café", "日本語", "עברית", "مرحبا", "line\nnext\tcol", "😀"):
        assert plain(ordinary) == ordinary
        assert str(shown(ordinary)) == str(Markup.escape(ordinary))


def test_markup_in_caller_text_stays_text() -> None:
    html = str(shown('<img src=x onerror=alert(1)>\u200b"&'))
    assert "<img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&#34;&amp;" in html


def _unescape(text: str) -> str:
    return re.sub(
        r"\\u([0-9a-f]{4})|\\U([0-9a-f]{8})", lambda m: chr(int(m.group(1) or m.group(2), 16)), text
    )


def test_random_text_is_revealed_losslessly_and_leaves_nothing_invisible() -> None:
    rng = random.Random(17)
    for _ in range(3000):
        text = "".join(chr(rng.randrange(sys.maxunicode + 1)) for _ in range(rng.randrange(12)))
        text = text.replace("\\", "/")  # a literal backslash-u would read back as an escape
        runs = list(reveal(text))
        assert "".join(p if not hidden else _unescape(p) for p, hidden in runs) == text
        for part, hidden in runs:
            assert hidden or not any(invisible(c) for c in part)
        out = plain(text)
        assert not any(invisible(c) for c in out if c not in "\n\t"), repr(text)
        assert (FLAG in out) == any(hidden for _, hidden in runs)
        html = str(shown(text))
        assert not any(invisible(c) for c in html if c not in "\n\t")
        assert "<" not in re.sub(r"</?span[^>]*>", "", html)


def test_every_template_shows_caller_text_through_the_filters() -> None:
    """A template that prints a caller-controlled field without `shown`/`plain` would let an
    override through: every `{{ … }}` naming one must use a filter."""
    env = templates()
    fields = (
        "capability",
        "requester",
        "reason",
        "note",
        "decided_by",
        "decided_via",
        "human.id",
        "human.roles",
        "message",
        "input",
        "key",
        "value",
        "summary",
        "description",
        "asking",
        "on_behalf",
        "on_behalf_of",
        "requester_kind",
        "requester_roles",
    )
    for name in env.list_templates():
        source = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
        # A textarea holds the approver's own note, typed back into the form: text only.
        source = re.sub(r"<textarea[^>]*>.*?</textarea>", "", source)
        for expr in re.findall(r"\{\{(.*?)\}\}", source):
            if any(re.search(rf"\b{re.escape(f)}\b", expr) for f in fields):
                if "segment" in expr or "input_hash" in expr:
                    continue
                if re.match(r"\s*(summary|tree|when)\(", expr):
                    continue  # macros.html: they apply `shown` themselves (checked there)
                assert "shown" in expr or "plain" in expr, f"{name}: {{{{{expr}}}}}"
    assert unicodedata.category("\u202e") == "Cf"
