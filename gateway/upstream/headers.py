"""Caller-chosen values the gateway forwards upstream as gRPC metadata (docs/upstreams.md §3).

`correlation_id` and `idempotency_key` travel as `x-capgate-correlation-id` and
`x-capgate-idempotency-key`. gRPC (HTTP/2) header values allow only printable ASCII, and servers
refuse header blocks over their limit (grpc-core: 8 KiB soft, 16 KiB hard). A value outside that
would fail inside grpcio or at the upstream, after the idempotency key was claimed or the
approval consumed, so stage 5 refuses it first (INPUT_INVALID naming the field, never the value).

The rule: at most `MAX_FORWARDED_LENGTH` characters, each printable ASCII (space 0x20 to `~`
0x7E), not starting or ending with a space (HTTP/2 forbids surrounding whitespace in a field
value). Empty means absent. Tabs, control characters (NUL, CR, LF, DEL), and anything beyond
ASCII (`é`, bidi controls) are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from gateway.errors import InputIssue

# What every upstream call of any kind is sent: (key, value) pairs, as gRPC metadata or, for
# the kinds over HTTP, as headers of the same names.
Metadata = Sequence[tuple[str, str]]

__all__ = ["FORWARDED_RULE", "MAX_FORWARDED_LENGTH", "Metadata", "forwarded_value_issues"]

MAX_FORWARDED_LENGTH: Final = 256
FORWARDED_RULE: Final = (
    f"must be at most {MAX_FORWARDED_LENGTH} printable ASCII characters "
    "(0x20-0x7E), not starting or ending with a space"
)
# fullmatch: one or more printable ASCII characters whose first and last are not a space.
_ALLOWED: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def forwarded_value_issues(fields: Iterable[tuple[str, str]]) -> tuple[InputIssue, ...]:
    """One issue per (field name, value) pair that may not be sent as a metadata value. The
    issue's path is the request field's name; its message states the rule, never the value."""
    return tuple(
        InputIssue(name, FORWARDED_RULE)
        for name, value in fields
        if value and (len(value) > MAX_FORWARDED_LENGTH or _ALLOWED.fullmatch(value) is None)
    )
