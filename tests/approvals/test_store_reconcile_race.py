"""reconcile() never drops an index entry written while it runs (a create in flight): it removes
only entries whose records it loaded and found wrong. Real Redis."""

from __future__ import annotations

from collections.abc import Collection

import pytest
from approvalkit import FakeClock, new_record

from gateway.state.approvals import ApprovalRecord, RedisApprovalStore, upkeep

pytestmark = pytest.mark.integration


async def test_an_entry_indexed_while_reconcile_runs_is_kept(
    store: RedisApprovalStore, clock: FakeClock
) -> None:
    keys = store.keys
    redis = store._redis
    await redis.zadd(keys.pending, {"gone-record": clock() + 60})  # stale: no record
    created: list[ApprovalRecord] = []

    async def load(ids: Collection[str]) -> dict[str, ApprovalRecord]:
        if "gone-record" in ids and not created:
            # A create lands between reconcile's read of the index and its clean-up.
            created.append(await store.create(new_record(clock)))
        return await store.get_many(ids)

    await upkeep.reconcile(
        redis,
        keys,
        load,
        extend=store._scripts["extend"],
        retention_s=store.settings.retention_s,
        now=clock(),
    )
    pending = {m.decode() for m in await redis.zrange(keys.pending, 0, -1)}
    assert created and created[0].id in pending
    assert "gone-record" not in pending
