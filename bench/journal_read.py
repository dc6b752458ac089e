"""`python -m bench.journal_read`: what the idempotency journal's early read (ADR 0034) costs a
keyed call against a real Redis under `appendfsync always` (the setting approvals need), beside
the claim it precedes and a PING on the same connection (docs/performance.md).

Each round: a claim of a fresh key (a write: waits for the fsync), its completion, then the
early read of that finished key (read only), then a PING; `CALLS` rounds, medians in µs.
Writes bench/out/journal_read.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config.settings import RedisSettings
from gateway.state.connections import connect
from gateway.state.embedded import free_port, select, spawn
from gateway.state.idempotency import RedisIdempotencyStore

OUT = Path(__file__).parent / "out" / "journal_read.json"
CALLS = 2000
FLAGS = ["--appendonly", "yes", "--appendfsync", "always"]


async def _measure() -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="cg-idem-"))
    port = free_port()
    argv = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(home), *FLAGS]
    process = spawn(select(), argv, home)
    redis = connect(RedisSettings(url=f"redis://127.0.0.1:{port}/0", key_prefix="bench"))
    try:
        for _ in range(100):  # until it answers
            try:
                await redis.ping()
                break
            except Exception:  # not up yet
                await asyncio.sleep(0.05)
        store = RedisIdempotencyStore(redis, prefix="bench", ttl_s=600, clock=time.time)
        claim, read, ping = [], [], []
        for i in range(CALLS + 50):
            scope = ("iss", "alice", "agent", "orders.refund", f"k-{i}")
            started = time.perf_counter()
            await store.claim(scope, "h", f"e-{i}", lease_s=30, request_hash="h")
            claimed = time.perf_counter() - started
            await store.complete(scope, b"envelope", execution_id=f"e-{i}")
            started = time.perf_counter()
            await store.peek(scope, "h")
            peeked = time.perf_counter() - started
            started = time.perf_counter()
            await redis.ping()
            pinged = time.perf_counter() - started
            if i >= 50:  # after warming: the scripts loaded
                claim.append(claimed)
                read.append(peeked)
                ping.append(pinged)
    finally:
        await redis.aclose()
        process.terminate()
        process.wait(10)
    return {
        "claim_us": round(statistics.median(claim) * 1e6),
        "read_us": round(statistics.median(read) * 1e6),
        "ping_us": round(statistics.median(ping) * 1e6),
    }


def main() -> None:
    figures = asyncio.run(_measure())
    print(
        f"appendfsync always: claim {figures['claim_us']} µs, early read {figures['read_us']} µs,"
        f" PING {figures['ping_us']} µs"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
