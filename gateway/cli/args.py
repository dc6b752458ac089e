"""What every `capgate` command line shares: argparse that never echoes a credential, options
accepted before or after the sub-command, and a quiet exit when stdout is closed early.

Argparse's own errors quote what they could not parse (`unrecognized arguments: --token eyJ...`);
`Parser.error` prints option names only and redacts every secret-looking value, so a mistyped
command line never copies a bearer token into a terminal, a CI log or a bug report.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

SECRET_OPTIONS = frozenset({"--token"})
REDACTED = "<redacted>"

# A JWS compact serialisation (three base64url parts, the header starting `{"` = `eyJ`), and the
# password of a URL (`redis://user:secret@host`).
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@", re.IGNORECASE)
# argparse's message for a sub-command it does not know (3.12: quoted choices, 3.13+: bare).
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def suggestion(message: str) -> str:
    """` (did you mean 'approve'?)` for an argparse invalid-choice message with a near choice."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return ""
    choices = [c.strip().strip("'") for c in found.group(2).split(",")]
    near = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""


def secret_values(argv: Sequence[str]) -> list[str]:
    """The values given to `SECRET_OPTIONS` (`--token X` or `--token=X`), longest first."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in SECRET_OPTIONS:
            if eq:
                found.append(value)
            elif i + 1 < len(argv):
                found.append(argv[i + 1])
    return sorted((v for v in found if v), key=len, reverse=True)


def redact(text: str, argv: Sequence[str] = ()) -> str:
    """`text` without the secret values of `argv`, JWT-shaped strings or URL passwords."""
    for value in secret_values(argv):
        text = text.replace(value, REDACTED)
    text = _JWT.sub(REDACTED, text)
    return _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors name options, never their values.

    Abbreviated long options are off: `--tok X` must not slip a secret past `SECRET_OPTIONS`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._argv: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._argv, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            named = [e.partition("=")[0] for e in extras if e.startswith("-")]
            values = len(extras) - len(named)
            shown = " ".join(named)
            if values:
                what = "value" if values == 1 else "values"
                shown = f"{shown} (and {values} {what} not shown)".strip()
            self.error(f"unrecognized arguments: {shown}")
        return parsed

    def error(self, message: str) -> NoReturn:
        # A sub-command's parser may see only its part of the line: check the whole one too.
        argv = [*self._argv, *sys.argv[1:]]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {redact(message + suggestion(message), argv)}\n")


def everywhere(
    parser: argparse.ArgumentParser,
    subparsers: Sequence[argparse.ArgumentParser],
    add: Callable[[argparse.ArgumentParser, Callable[[Any], Any]], None],
) -> None:
    """Add the options of `add` to `parser` and to each sub-command, as git and kubectl accept
    them: `capgate approvals --token X list` and `capgate approvals list --token X` alike.

    `add(p, default)` adds the options to `p`, each with `default=default(real_default)`: the
    top-level parser keeps the real defaults, the sub-commands' copies default to SUPPRESS so
    that an option given before the sub-command is not reset by the sub-command's default."""
    add(parser, lambda value: value)
    for sub in subparsers:
        add(sub, lambda _value: argparse.SUPPRESS)


def run_entry(entry: Callable[[], int]) -> int:
    """Run a command's main; a reader that stopped early (`capgate ... | head -1`) ends it
    quietly with status 141 (as SIGPIPE would), without a traceback or a second error at exit."""
    try:
        code = entry()
        sys.stdout.flush()
    except BrokenPipeError:
        # Later flushes (at interpreter exit) would fail again: point stdout at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


def log_to_stderr(level: str) -> None:
    """The log format of the long-running commands (`serve`, `inbox`): one line a record."""
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
