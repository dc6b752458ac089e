"""Load-time problems: every issue in a policy set is collected and raised at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LoadIssue", "PolicyLoadError"]


@dataclass(frozen=True, slots=True, order=True)
class LoadIssue:
    """One problem, located at `path:line:column` (1-based) in a policy file."""

    path: str
    line: int
    column: int
    policy: str | None
    rule: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        if self.policy is None:
            return f"{where}: {self.message}"
        who = self.policy if self.rule is None else f"{self.policy}/rules[{self.rule}]"
        return f"{where}: {who}: {self.message}"


class PolicyLoadError(Exception):
    """A policy set failed to load; `.errors` lists every issue found, in file order.

    `.names` are the policy names the files define (also those of policies that failed to
    compile), so a caller can still tell a reference to no policy at all from one to a broken
    policy."""

    def __init__(self, errors: list[LoadIssue], names: Iterable[str] = ()) -> None:
        self.errors = sorted(set(errors))
        self.names = frozenset(names)
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.errors)
        head = f"{count} problem{'s' if count != 1 else ''} in the policy set"
        return "\n".join([head, *(str(issue) for issue in self.errors)])
