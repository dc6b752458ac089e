"""Bench-only start-up hook for a gateway under `bench.tails` (on PYTHONPATH, never installed).

- `BENCH_GC_POLICY=off`: the serving GC policy (gateway/process/gcpolicy.py, ADR 0041) made a
  no-op, so the same code runs as before it: the A side of an A/B (`bench.tails --gc-ab`).
- `BENCH_GC_TRACE=PATH`: every collection's generation and pause time, written as JSON to
  PATH.<pid> now and then and at exit, for `bench.tails` to summarize.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import time
from typing import Any

if os.environ.get("BENCH_GC_POLICY") == "off":
    from gateway.process import gcpolicy

    gcpolicy.settle = lambda: None
    gcpolicy.thaw = lambda: None

_TRACE = os.environ.get("BENCH_GC_TRACE")
_started = [0.0]
_pauses: list[tuple[int, float]] = []


def _dump() -> None:
    with open(f"{_TRACE}.{os.getpid()}", "w") as out:
        json.dump({"pauses": _pauses, "frozen": gc.get_freeze_count()}, out)


def _record(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    _pauses.append((info["generation"], (time.perf_counter() - _started[0]) * 1000))
    if len(_pauses) % 500 == 0:
        _dump()


if _TRACE:
    gc.callbacks.append(_record)
    atexit.register(_dump)
