"""grpcio's log line for a request message it cannot decode: one short line, rate-limited.

grpcio decodes a request before any servicer code runs, so before authentication. For each
message that does not parse it logs, on `grpc._cython.cygrpc`, an ERROR with the DecodeError's
full traceback (the caller gets UNKNOWN). An unauthenticated peer could flood the log with
them. `UndecodableRequests`, installed on that logger when the listeners start, turns each
into one WARNING line without a traceback or any payload byte, lets through at most `burst`
of them and then `rate_per_s`, and counts the rest: the next line let through, or `flush()` at
shutdown, says how many were suppressed. Every other record of that logger passes untouched
(an unexpected error in a servicer keeps its traceback).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Final

from google.protobuf.message import DecodeError

LOGGER: Final = "grpc._cython.cygrpc"
_METHOD = re.compile(r"raised by servicer method \[(/[\w.]{1,200}/\w{1,100})\]")


class UndecodableRequests(logging.Filter):
    """Condense and rate-limit grpcio's per-message decode errors (a token bucket)."""

    def __init__(
        self,
        *,
        burst: int = 5,
        rate_per_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self.suppressed = 0  # since the last line let through
        self.seen = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, DecodeError):
            return True
        self.seen += 1
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate_per_s)
        self._last = now
        if self._tokens < 1:
            self.suppressed += 1
            return False
        self._tokens -= 1
        match = _METHOD.search(str(record.msg))
        method = match.group(1) if match else "(unknown method)"
        message = f"undecodable request message for {method}: refused with UNKNOWN"
        if self.suppressed:
            message += f" ({self.suppressed} more suppressed since the last such line)"
            self.suppressed = 0
        record.msg, record.args = message, ()
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True

    def flush(self, log: logging.Logger) -> None:
        """Report what was suppressed since the last line (at shutdown)."""
        if self.suppressed:
            log.warning(
                "undecodable request messages: %d more suppressed since the last such line",
                self.suppressed,
            )
            self.suppressed = 0


def install(
    *, burst: int = 5, rate_per_s: float = 0.2, clock: Callable[[], float] = time.monotonic
) -> UndecodableRequests:
    """The process's filter on grpcio's logger: added once, the same one returned after."""
    logger = logging.getLogger(LOGGER)
    for existing in logger.filters:
        if isinstance(existing, UndecodableRequests):
            return existing
    created = UndecodableRequests(burst=burst, rate_per_s=rate_per_s, clock=clock)
    logger.addFilter(created)
    return created
