"""The serving process's garbage-collector policy (ADR 0041): what start-up and every snapshot
load leave behind is frozen out of the cyclic collector.

A gateway process holds a large, long-lived heap built once (imported modules, the snapshot's
compiled CEL programs, schemas and descriptors, gRPC and OpenTelemetry machinery) and then
makes small short-lived objects per call. CPython's full (generation 2) collection walks every
tracked object, so each one paused the event loop for the whole heap's walk (30 to 40 ms on
the development machine), and all calls in flight waited: the p99 at 16 in flight.
`gc.freeze()` moves what exists into a permanent generation the collector skips; objects still
die by reference count, and the young generations are collected as before.

Frozen objects in a reference cycle are never collected, so a reload (a new snapshot, the old
one dropped) unfreezes at once, and `REFREEZE_AFTER_S` later, when an ordinary call on the old
snapshot has ended, collects everything once (one full pause per reload, which the old
snapshot's cycles need anyway) and freezes again. Only `capgate serve` applies it: the process
is the gateway's own; an embedder's process (tests, `start()` callers) keeps its own policy.
"""

from __future__ import annotations

import gc

# After a reload: past the default call timeout (30 s, `defaults.timeout`), the settlement bound
# (pipeline.runner.SETTLE_S, 10 s) and a retired channel's grace (upstream.channels
# .RETIRED_GRACE_S), so an ordinary call on the old snapshot has ended (a review found 15 s
# shorter than a call may run).
REFREEZE_AFTER_S = 60.0


def settle() -> None:
    """Collect once, then freeze whatever survives: call when start-up is done."""
    gc.collect()
    gc.freeze()


def thaw() -> None:
    """After a snapshot swap: the frozen objects back to the collector (the old snapshot among
    them), to be collected as soon as nothing uses them."""
    gc.unfreeze()
