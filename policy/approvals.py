"""Merging approval requirements (seed 001, stage 7: one request for all of them).

An approver must satisfy every requirement: the required roles are the union (a
requirement without roles asks for `approver`), the expiry is the earliest one, and
every reason is kept once, in stance order. The issue-28 fields merge toward the stricter:
a grant may stand in only if every part allows it, the quorum is the largest (and at
least one approver per distinct role), distinct roles are the union. Escalation never
loosens a part that has none (docs/approvals.md "Escalation"): it comes at the latest
`escalate_after` of the parts that declare one, and its roles are the union of those parts'
escalation roles and the approver roles of every part that declares none. No part declaring
one: no escalation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

from policy.document import DEFAULT_APPROVER_ROLE, ApprovalSpec
from policy.model import ApprovalRequirement, Stance

__all__ = ["join_ask", "merge_requirements"]


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
    escalation: set[str] = set()
    if escalations:
        for _, spec in parts:
            if spec is None:
                escalation.add(DEFAULT_APPROVER_ROLE)
            elif spec.escalate_after is None:
                escalation |= spec.roles or {DEFAULT_APPROVER_ROLE}
            else:
                escalation |= spec.escalation_roles
    return ApprovalRequirement(
        reasons=tuple(reasons),
        roles=frozenset(roles),
        expires_in=min(expiries, default=None),
        policies=tuple(policies),
        grantable=all(s.grantable for s in specs),
        quorum=max(1, len(distinct), *(s.quorum for s in specs)),
        distinct_roles=distinct,
        escalate_after=max(escalations, default=None),
        escalation_roles=frozenset(escalation),
    )


def join_ask(
    requirement: ApprovalRequirement, reasons: Sequence[str], role: str
) -> ApprovalRequirement:
    """A hook's or a budget's ask joined to a requirement: its reasons, never grantable. The
    ask declares no escalation, so an escalating requirement's escalation roles gain `role`
    (the default approver role the ask would need alone): escalation never loosens it."""
    escalation = requirement.escalation_roles
    if requirement.escalate_after is not None:
        escalation = escalation | {role}
    return dataclasses.replace(
        requirement,
        reasons=tuple(dict.fromkeys((*requirement.reasons, *reasons))),
        grantable=False,
        escalation_roles=escalation,
    )
