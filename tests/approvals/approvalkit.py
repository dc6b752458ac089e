"""Shared helpers of the approval tests: actors, a fake clock, a record factory."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from typing import Any

from gateway.model import Actor
from gateway.state.approvals import ApprovalRecord
from gateway.values.canonical import input_hash

T0 = 1_700_000_000.0
ALICE = Actor(id="alice", kind="user", issuer="https://idp.example")
BOB = Actor(id="bob", kind="user", issuer="https://idp.example", roles=("approver",))
CAROL = Actor(id="carol", kind="user", issuer="https://idp.example", roles=("approver", "finance"))
INBOX = Actor(id="inbox", kind="service", issuer="https://idp.example")


class FakeClock:
    """Injected time (STYLE: tests never sleep for real time)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


_seq = itertools.count()


def new_record(
    clock: Callable[[], float],
    *,
    requester: Actor = ALICE,
    capability_id: str = "orders.refund",
    surface: str = "agent",
    value: Any = None,
    roles: tuple[str, ...] = ("approver",),
    expires_in: float = 900.0,
) -> ApprovalRecord:
    value = {"order": f"o-{next(_seq)}", "amount": 250} if value is None else value
    now = clock()
    return ApprovalRecord(
        id=secrets.token_hex(16),  # as the gateway makes them (never a leading "-")
        capability_id=capability_id,
        capability_digest="sha256:cap",
        surface=surface,
        requester=requester,
        input=value,
        input_hash=input_hash(value),
        created_at=now,
        expires_at=now + expires_in,
        reasons=("refunds over 100 need a second pair of eyes",),
        types=("policy",),
        risk="high",
        side_effect="write",
        approver_roles=roles,
        message="A human must approve this refund.",
        requesting_execution_id=f"exec-{next(_seq)}",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
