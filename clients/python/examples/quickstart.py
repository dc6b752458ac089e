"""Quickstart: describe, invoke, and the approval flow, against the shared stack.

    python scripts/stack.py start                  # from the repository root
    .venv/bin/python clients/python/examples/quickstart.py

Addresses and tokens come from .run/stack.json (or the file named by $CAPGATE_STACK).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from capgate_client import (
    ApprovalRequired,
    AsyncAdminClient,
    AsyncClient,
    Cancelled,
    Completed,
    Failed,
)

STACK = Path(os.environ.get("CAPGATE_STACK") or Path(__file__).parents[3] / ".run/stack.json")


async def main(stack: dict[str, Any]) -> None:
    async with (
        AsyncClient(stack["agents"], token=stack["tokens"]["alice"], timeout=10) as alice,
        AsyncAdminClient(stack["admin"], token=stack["tokens"]["bob"], timeout=10) as bob,
    ):
        # 1. What may alice call?
        for capability in await alice.describe():
            print(f"{capability.id:16} {capability.side_effect:6} {capability.description}")

        # 2. A plain call: the output is a native dict; unwrap() raises CapgateError otherwise.
        order = (await alice.invoke("orders.get", {"order_id": "o-1001"})).unwrap()
        print("order", order["order_id"], order["status"])

        # 3. Governed failures come back as outcomes; match on them.
        match await alice.invoke("orders.refund", {"order_id": "o-1001", "amount": 50000}):
            case Failed(error) | Cancelled(error):
                print("denied:", error.code, "-", error.message)
            case other:
                print("unexpected:", other)

        # 4. The approval flow: alice asks, bob approves on the admin listener, alice resumes.
        asked = await alice.invoke(
            "orders.refund",
            {"order_id": "o-1003", "amount": 800},
            idempotency_key=f"qs-{time.time_ns()}",
        )
        if not isinstance(asked, ApprovalRequired):
            raise SystemExit(f"expected an approval, got {asked!r}")
        print("approval required:", asked.approval.id, "; ".join(asked.approval.reasons))
        await bob.approve(asked.approval.id, asked.approval.input_hash, note="quickstart")
        approval = await alice.wait_for_approval(asked.approval.id, timeout=30)
        print("approval", approval.status, "by", approval.decided_by and approval.decided_by.id)
        match await alice.resume(asked.approval.id):
            case Completed(refund):
                print("refunded:", refund["refund_id"], "card", refund["card_last4"])
            case other:
                other.unwrap()  # raises its CapgateError


if __name__ == "__main__":
    asyncio.run(main(json.loads(STACK.read_text())))
