"""Merging approval requirements (seed 001, stage 7: one request for all of them).

An approver must satisfy every requirement: the required roles are the union (a
requirement without roles asks for `approver`), the expiry is the earliest one, and
every reason is kept once, in stance order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from policy.document import DEFAULT_APPROVER_ROLE, ApprovalSpec
from policy.model import ApprovalRequirement, Stance

__all__ = ["merge_requirements"]


def merge_requirements(parts: Sequence[tuple[Stance, ApprovalSpec | None]]) -> ApprovalRequirement:
    """One requirement from each require-approval stance and its rule's `approval`."""
    reasons: dict[str, None] = {}
    roles: set[str] = set()
    expiries: list[timedelta] = []
    policies: dict[str, None] = {}
    for stance, spec in parts:
        reason = (spec.reason if spec else None) or stance.message
        reasons[reason or f"required by policy {stance.policy}"] = None
        roles |= spec.roles if spec else {DEFAULT_APPROVER_ROLE}
        if spec and spec.expires_in is not None:
            expiries.append(spec.expires_in)
        policies[stance.policy] = None
    return ApprovalRequirement(
        reasons=tuple(reasons),
        roles=frozenset(roles),
        expires_in=min(expiries, default=None),
        policies=tuple(policies),
    )
