"""`python -m bench.concealment`: what an approval lookup costs for its owner, for another
actor and for an unknown id (SI-8, issue 14 item 4), against a real Redis.

The concealed answer must not be told apart by time: with ownership compared inside Redis
(`RedisApprovalStore.get_own`) a stranger's lookup runs what an unknown id's runs. For
comparison it also times the former path — read the whole record (`get`), parse it, then compare
the requester — whose stranger/unknown ratio was 2.1-2.5x over gRPC. Each figure is the median of
`ROUNDS` rounds of `CALLS` sequential lookups (µs per lookup). Writes
bench/out/concealment.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gateway.config.settings import ApprovalSettings, RedisSettings
from gateway.model import Actor
from gateway.state.approvals.records import ApprovalRecord, Status
from gateway.state.approvals.store import RedisApprovalStore
from gateway.state.connections import connect
from gateway.state.embedded import RedisProcess
from gateway.values.canonical import input_hash

OUT = Path(__file__).parent / "out" / "concealment.json"
ROUNDS = 7
CALLS = 400

ALICE = Actor(id="alice", kind="user", issuer="bench-idp", roles=("agent",))
CAROL = Actor(id="carol", kind="user", issuer="bench-idp", roles=("agent",))
# A realistically sized record: the stored input is what the former path read and parsed.
INPUT = {
    "order_id": "ord-123456",
    "amount": 820.5,
    "reason": "Customer reports the parcel arrived damaged; photos are attached. " * 4,
    "items": [{"sku": f"SKU-{i:05d}", "qty": i + 1, "price": 12.5 * (i + 1)} for i in range(12)],
}


async def _old_lookup(store: RedisApprovalStore, approval_id: str, actor: Actor) -> Any:
    record = await store.get(approval_id)
    if record is None or record.requester.identity != actor.identity or record.surface != "agent":
        return None
    return record


async def _per_call_us(lookups: dict[str, Callable[[], Awaitable[Any]]]) -> dict[str, float]:
    """Median µs per lookup of each variant; rounds interleave the variants, so that a noisy
    neighbour on the machine slows all of them alike."""
    rounds: dict[str, list[float]] = {name: [] for name in lookups}
    for _ in range(ROUNDS):
        for name, lookup in lookups.items():
            started = time.perf_counter()
            for _ in range(CALLS):
                await lookup()
            rounds[name].append((time.perf_counter() - started) / CALLS * 1e6)
    return {name: round(statistics.median(values), 1) for name, values in rounds.items()}


async def measure() -> dict[str, float]:
    run_dir = Path(tempfile.mkdtemp(prefix="cg-bench-"))
    server = RedisProcess(run_dir / "redis").start()
    redis = connect(RedisSettings(url=server.url, key_prefix="bench"))
    store = RedisApprovalStore(redis, prefix="bench", settings=ApprovalSettings(), clock=time.time)
    now = time.time()
    record = await store.create(
        ApprovalRecord(
            id=os.urandom(16).hex(),
            capability_id="orders.refund",
            capability_digest="d",
            surface="agent",
            requester=ALICE,
            input=INPUT,
            input_hash=input_hash(INPUT),
            created_at=now,
            expires_at=now + 3600,
            status=Status.PENDING,
        )
    )
    unknown = os.urandom(16).hex()
    out: dict[str, float] = {}
    try:
        for _ in range(2):  # warm-up: scripts loaded, connections open
            await store.get_own(record.id, requester=CAROL, surface="agent")
            await store.get(record.id)
        out.update(
            await _per_call_us(
                {
                    "get_own: stranger": lambda: store.get_own(
                        record.id, requester=CAROL, surface="agent"
                    ),
                    "get_own: unknown id": lambda: store.get_own(
                        unknown, requester=CAROL, surface="agent"
                    ),
                    "get_own: owner": lambda: store.get_own(
                        record.id, requester=ALICE, surface="agent"
                    ),
                    "former get+compare: stranger": lambda: _old_lookup(store, record.id, CAROL),
                    "former get+compare: unknown id": lambda: _old_lookup(store, unknown, CAROL),
                }
            )
        )
        out["ratio stranger/unknown (get_own)"] = round(
            out["get_own: stranger"] / out["get_own: unknown id"], 2
        )
        out["ratio stranger/unknown (former)"] = round(
            out["former get+compare: stranger"] / out["former get+compare: unknown id"], 2
        )
    finally:
        await redis.aclose()
        server.stop()
    return out


def main() -> None:
    results = asyncio.run(measure())
    width = max(map(len, results))
    for name, value in results.items():
        unit = "" if name.startswith("ratio") else " µs"
        print(f"{name:<{width}}  {value:>8}{unit}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
