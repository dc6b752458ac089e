"""Runnable snippets in the docs: a fenced code block preceded, on the line before its opening
fence, by an HTML comment that names it (invisible when the Markdown is rendered):

    <!-- snippet: readme-python -->
    ```sh
    .venv/bin/python - <<'PY'
    ...
    ```

`extract` reads every marked block of a file as it is written; `run` runs one the way a reader
would: `sh`/`bash`/`console` blocks with bash (`-e -o pipefail`) in the given directory with the
venv's `bin` first on `PATH` (so `capgate ...` and `python` are the project's), `python` blocks
as a script file with the venv's python, and other languages (`go`, ...) are only extracted:
the test that needs them writes them where their language expects. A marker whose next line
is not an opening fence, an unterminated fence, and a name used twice are errors.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where snippets may live: the README, docs/ and the clients' READMEs.
DOC_GLOBS = ("README.md", "docs/**/*.md", "clients/*/README.md")
_MARKER = re.compile(r"^<!--\s*snippet:\s*([a-z0-9][a-z0-9-]*)\s*-->\s*$")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*$")
SHELLS = frozenset({"sh", "bash", "console", "shell"})


class SnippetError(ValueError):
    """A marker that does not mark a runnable block."""


@dataclass(frozen=True)
class Snippet:
    name: str
    lang: str
    text: str
    path: Path
    line: int  # of the opening fence, 1-based

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def extract(path: Path) -> dict[str, Snippet]:
    """Every marked block of one Markdown file, by name. A marker inside a fenced block (a doc
    showing how to mark one) is text, not a marker."""
    lines = path.read_text().splitlines()
    found: dict[str, Snippet] = {}
    number = 0
    while number < len(lines):
        line, number = lines[number], number + 1
        marker = _MARKER.match(line.strip())
        fence = _FENCE.match(lines[number]) if marker and number < len(lines) else None
        if marker and fence is None:
            raise SnippetError(f"{path}:{number}: {marker.group(1)!r} is not followed by a fence")
        opening = fence or _FENCE.match(line)
        if opening is None:
            continue
        start = number + 1 if fence else number  # the fence's line, 1-based
        body, closed = _body(lines, start, opening.group(1))
        if not closed:
            raise SnippetError(f"{path}:{start}: the fence is not closed")
        number = start + len(body) + 1
        if marker is None:
            continue
        name = marker.group(1)
        if name in found:
            raise SnippetError(f"{path}:{start - 1}: snippet {name!r} is marked twice")
        found[name] = Snippet(name, opening.group(2), "\n".join(body) + "\n", path, start)
    return found


def _body(lines: list[str], fence_line: int, closing: str) -> tuple[list[str], bool]:
    """The lines after the fence on `fence_line` (1-based) up to its closing fence."""
    body: list[str] = []
    for inner in lines[fence_line:]:
        if inner.strip() == closing:
            return body, True
        body.append(inner)
    return body, False


def extract_all(root: Path = ROOT) -> dict[str, Snippet]:
    """Every marked block of the docs, by name; a name is unique across them."""
    everything: dict[str, Snippet] = {}
    for pattern in DOC_GLOBS:
        for path in sorted(root.glob(pattern)):
            for name, snippet in extract(path).items():
                if name in everything:
                    raise SnippetError(
                        f"{snippet.where}: {name!r} is also {everything[name].where}"
                    )
                everything[name] = snippet
    return everything


def run(
    snippet: Snippet,
    *,
    prelude: str = "",
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run one snippet as written. `prelude` is what the doc tells the reader to have pasted
    into their shell first (an `export CAPGATE_TOKEN=...` line): it runs in the same bash."""
    environ = {**os.environ, **(env or {})}
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    with tempfile.TemporaryDirectory(prefix="snippet-") as scratch:
        if snippet.lang in SHELLS:
            script = f"{prelude}\n{snippet.text}"
        elif snippet.lang == "python":
            saved = Path(scratch) / f"{snippet.name}.py"
            saved.write_text(snippet.text)
            script = f'{prelude}\n"{sys.executable}" "{saved}"'
        else:
            raise SnippetError(f"{snippet.where}: no runner for {snippet.lang!r} blocks")
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
