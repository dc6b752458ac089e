"""What a failed config load reports: every problem at once, each with its place in the file.

Messages never carry values substituted from the environment (DESIGN §12): they are written not
to quote values, and `ConfigError` scrubs every substituted value from them as a second guard.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
REDACTED = "<redacted>"

PathParts = tuple[str | int, ...]


def format_path(parts: Iterable[str | int]) -> str:
    """("capabilities", 2, "expose") -> "capabilities[2].expose"; odd keys are quoted."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            quoted = part.replace("\\", "\\\\").replace('"', '\\"')
            out += f'["{quoted}"]'
    return out


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a config: where (`path_in_file`, 1-based `line`, `file`) and what."""

    path_in_file: str
    line: int | None
    message: str
    file: str | None = None
    column: int | None = None  # set where the place is inside an expression (policy files)

    def __str__(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        if not self.path_in_file and self.column is not None:
            return f"{where}: {self.message}"  # a policy file's own problem (not a policy's)
        return f"{where}: {self.path_in_file or '(root)'}: {self.message}"


class ConfigError(Exception):
    """A config that must not be used; `problems` lists every problem found, in file order.

    Its text names every problem, one per line (a log line or a refusal never says "and N
    more")."""

    def __init__(self, problems: Sequence[Problem], *, secrets: Collection[str] = ()) -> None:
        cleaned = [_scrub(p, secrets) for p in problems]
        self.problems: list[Problem] = sorted(set(cleaned), key=_order)
        count = len(self.problems)
        lines = "".join(f"\n  {p}" for p in self.problems)
        super().__init__(f"invalid config, {count} problem(s):{lines}")


def _order(problem: Problem) -> tuple[str, int, int, str, str]:
    return (
        problem.file or "",
        problem.line or 0,
        problem.column or 0,
        problem.path_in_file,
        problem.message,
    )


def _scrub(problem: Problem, secrets: Collection[str]) -> Problem:
    message = problem.message
    # Longest first, so a value containing another is replaced whole.
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        message = message.replace(value, REDACTED)
    return problem if message == problem.message else replace(problem, message=message)
