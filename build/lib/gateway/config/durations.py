"""Go-style durations ("250ms", "90s", "15m", "1h30m") as seconds (float)."""

from __future__ import annotations

import re

_UNITS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "ns": 1e-9,
}
# Longer unit names first so that "ms" is not read as "m" followed by "s".
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|us|\u00b5s|ns|h|m|s)")


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError when it is not a non-negative Go duration."""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise ValueError("not a duration such as 250ms, 90s, 15m or 1h30m")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise ValueError("empty duration")
    # Sub-nanosecond float noise (0.1 + 0.2) is not a meaningful part of a config duration.
    return round(total, 9)


def whole_seconds(text: str) -> int:
    """A duration that must be a whole number of seconds; raises ValueError otherwise."""
    seconds = parse_duration(text)
    if seconds != int(seconds):
        raise ValueError("must be a whole number of seconds")
    return int(seconds)
