"""Capability id globs: `*` matches exactly one dotted segment, `**` one or more."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["compile_globs"]


def _segment(part: str) -> str:
    if part == "**":
        return r"[^.]+(?:\.[^.]+)*"
    if part == "*":
        return r"[^.]+"
    return re.escape(part)


def compile_globs(patterns: Sequence[str]) -> re.Pattern[str]:
    """One anchored regex matching any of `patterns` (`orders.*`, `admin.**`, `orders.get`)."""
    alternatives = ("\\.".join(_segment(p) for p in pattern.split(".")) for pattern in patterns)
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")
