"""Merging approval requirements (seed 001, stage 7: one request for all of them).

An approver must satisfy every requirement: the required roles are the union (a
requirement without roles asks for `approver`), the expiry is the earliest one, and
every reason is kept once, in stance order. The issue-28 fields merge toward the stricter:
a grant may stand in only if every part allows it, the quorum is the largest (and at
least one approver per distinct role), escalation comes at the earliest `escalate_after`,
and distinct and escalation roles are the union.
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
    specs: list[ApprovalSpec] = []
    for stance, spec in parts:
        reason = (spec.reason if spec else None) or stance.message
        reasons[reason or f"required by policy {stance.policy}"] = None
        roles |= spec.roles if spec else {DEFAULT_APPROVER_ROLE}
        if spec and spec.expires_in is not None:
            expiries.append(spec.expires_in)
        if spec:
            specs.append(spec)
        policies[stance.policy] = None
    distinct = frozenset().union(*(s.distinct_roles for s in specs))
    escalations = [s.escalate_after for s in specs if s.escalate_after is not None]
    return ApprovalRequirement(
        reasons=tuple(reasons),
        roles=frozenset(roles),
        expires_in=min(expiries, default=None),
        policies=tuple(policies),
        grantable=all(s.grantable for s in specs),
        quorum=max(1, len(distinct), *(s.quorum for s in specs)),
        distinct_roles=distinct,
        escalate_after=min(escalations, default=None),
        escalation_roles=frozenset().union(*(s.escalation_roles for s in specs)),
    )
