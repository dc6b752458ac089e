"""Go-style durations (`90s`, `15m`, `1h30m`) as used by `approval.expires_in`."""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["DURATION_PATTERN", "format_duration", "parse_duration"]

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
"""The accepted spelling; the policy-file JSON Schema uses the same pattern."""

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_WHOLE = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> timedelta:
    """Parse a positive Go duration; raises ValueError on anything else."""
    if not _WHOLE.match(text):
        raise ValueError(f"{text!r} is not a duration like 90s, 15m or 1h30m")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
    if seconds <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """Format as a Go duration (`1h30m`, `90s` → `1m30s`); sub-second parts in `ms`."""
    total_ms = round(value.total_seconds() * 1000)
    hours, rest = divmod(total_ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    parts = [f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    if millis:
        parts.append(f"{millis}ms")
    return "".join(parts) or "0s"
