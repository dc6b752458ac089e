"""Stage 8's merged requirement (`gate_requirement`): the capability's `approval` block and the
policies', hooks' and budgets' requirement, merged toward the stricter (issue 28). Built from a
real config and snapshot; the budget's and the hooks' asks are never grantable (ADR 0038)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from gateway.config.loader import load_settings
from gateway.model import Actor
from gateway.pipeline.call import Call
from gateway.pipeline.snapshot import Snapshot, build_snapshot
from gateway.pipeline.stages.approval import GateRequirement, gate_requirement
from gateway.pipeline.stages.hooks import merge_hook_asks
from gateway.pipeline.stages.limits import _with_reasons
from gateway.upstream.channels import ChannelPool
from policy import ApprovalRequirement

ORDERS_PB = Path(__file__).resolve().parents[2] / "examples" / "orders" / "orders.pb"

CONFIG = f"""\
version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:0", surface: agent, auth: none}}
upstreams:
  orders: {{address: "127.0.0.1:9", descriptor_set: {ORDERS_PB}}}
approvals: {{default_expires_in: 10m, default_approver_role: approver}}
capabilities:
  - id: orders.refund
    description: Refund with two approvers.
    upstream: orders
    method: /orders.v1.Orders/RefundOrder
    side_effect: write
    risk: high
    approval:
      required: true
      reason: Refunds need two people.
      approvers: {{roles: [manager]}}
      expires_in: 1h
      quorum: 2
      distinct_roles: [finance]
      escalate_after: 45m
      escalation_roles: [cfo]
  - id: orders.cancel
    description: Cancel; approval only when a policy asks.
    upstream: orders
    method: /orders.v1.Orders/CancelOrder
    side_effect: write
    risk: medium
  - id: orders.purge
    description: Never by a grant.
    upstream: orders
    method: /orders.v1.Orders/CancelOrder
    side_effect: destructive
    risk: critical
    approval: {{required: true, grantable: false}}
"""

POLICY_PART = ApprovalRequirement(
    reasons=("Big refund.",),
    roles=frozenset({"support-lead"}),
    expires_in=timedelta(minutes=20),
    policies=("big-refund",),
    grantable=False,
    quorum=3,
    distinct_roles=frozenset({"risk"}),
    escalate_after=timedelta(minutes=30),
    escalation_roles=frozenset({"ceo"}),
)


@pytest.fixture
async def snapshot(tmp_path: Path) -> AsyncIterator[Snapshot]:
    path = tmp_path / "gateway.yaml"
    path.write_text(CONFIG)
    pool = ChannelPool()
    try:
        yield await build_snapshot(load_settings(path, environ={}), pool)
    finally:
        await pool.close()


def call_of(snapshot: Snapshot, capability: str, requirement=None) -> Call:
    call = Call(
        snapshot=snapshot,
        surface="agent",
        actor=Actor(id="u-alice", kind="user", issuer="idp"),
        capability_id=capability,
        raw_input=b"{}",
    )
    call.prepared = snapshot.capabilities[capability]
    call.requirement = requirement
    return call


async def test_the_capability_block_alone(snapshot):
    need = gate_requirement(call_of(snapshot, "orders.refund"))

    assert need == GateRequirement(
        reasons=("Refunds need two people.",),
        roles=("manager",),
        expires_in_s=3600.0,
        message="This call needs human approval before it can run.",
        grantable=True,
        quorum=2,
        distinct_roles=("finance",),
        escalate_after_s=2700.0,
        escalation_roles=("cfo",),
    )


async def test_capability_and_policies_merge_toward_the_stricter(snapshot):
    need = gate_requirement(call_of(snapshot, "orders.refund", POLICY_PART))

    assert need.reasons == ("Refunds need two people.", "Big refund.")
    assert need.roles == ("manager", "support-lead")
    assert need.expires_in_s == 1200.0  # the earliest
    assert need.grantable is False  # AND
    assert need.quorum == 3  # the largest
    assert need.distinct_roles == ("finance", "risk")  # the union
    assert need.escalate_after_s == 2700.0  # the latest: never sooner than a part asks
    assert need.escalation_roles == ("ceo", "cfo")  # the union


async def test_a_part_without_escalation_keeps_its_roles_after_the_escalation(snapshot):
    plain = ApprovalRequirement(
        reasons=("x",), roles=frozenset({"treasury"}), expires_in=None, policies=("p",)
    )
    need = gate_requirement(call_of(snapshot, "orders.refund", plain))
    assert need.escalate_after_s == 2700.0
    assert need.escalation_roles == ("cfo", "treasury")

    unnamed = ApprovalRequirement(reasons=("x",), roles=frozenset(), expires_in=None, policies=())
    need = gate_requirement(call_of(snapshot, "orders.refund", unnamed))
    assert need.escalation_roles == ("approver", "cfo")  # approvals.default_approver_role


async def test_the_quorum_is_at_least_one_approver_per_distinct_role(snapshot):
    part = ApprovalRequirement(
        reasons=("x",),
        roles=frozenset(),
        expires_in=None,
        policies=("p",),
        distinct_roles=frozenset({"risk", "legal"}),
        quorum=2,
    )

    need = gate_requirement(call_of(snapshot, "orders.refund", part))

    assert need.distinct_roles == ("finance", "legal", "risk")
    assert need.quorum == 3


async def test_a_policy_requirement_alone_keeps_its_options_and_the_defaults(snapshot):
    need = gate_requirement(call_of(snapshot, "orders.cancel", POLICY_PART))

    assert need.roles == ("support-lead",)
    assert (need.grantable, need.quorum, need.distinct_roles) == (False, 3, ("risk",))
    assert (need.escalate_after_s, need.escalation_roles) == (1800.0, ("ceo",))

    plain = ApprovalRequirement(reasons=("x",), roles=frozenset(), expires_in=None, policies=())
    need = gate_requirement(call_of(snapshot, "orders.cancel", plain))

    assert need.roles == ("approver",)  # approvals.default_approver_role
    assert need.expires_in_s == 600.0  # approvals.default_expires_in
    assert (need.grantable, need.quorum, need.distinct_roles) == (True, 1, ())
    assert (need.escalate_after_s, need.escalation_roles) == (None, ())


async def test_a_capability_that_is_not_grantable_stays_so(snapshot):
    plain = ApprovalRequirement(reasons=("x",), roles=frozenset(), expires_in=None, policies=())

    assert gate_requirement(call_of(snapshot, "orders.purge")).grantable is False
    assert gate_requirement(call_of(snapshot, "orders.purge", plain)).grantable is False


async def test_a_hook_ask_is_never_grantable_and_keeps_the_policies_options(snapshot):
    alone = call_of(snapshot, "orders.cancel")
    alone.hook_asks = ["The fraud hook asks."]
    await merge_hook_asks(alone, None)  # type: ignore[arg-type]
    assert alone.requirement is not None
    assert alone.requirement.grantable is False
    assert gate_requirement(alone).grantable is False

    grantable_part = ApprovalRequirement(
        reasons=("Big refund.",),
        roles=frozenset({"manager"}),
        expires_in=None,
        policies=("p",),
        quorum=2,
        escalate_after=timedelta(hours=1),
        escalation_roles=frozenset({"cfo"}),
    )
    joined = call_of(snapshot, "orders.cancel", grantable_part)
    joined.hook_asks = ["The fraud hook asks."]
    await merge_hook_asks(joined, None)  # type: ignore[arg-type]

    assert joined.requirement is not None
    assert joined.requirement.reasons == ("Big refund.", "The fraud hook asks.")
    assert joined.requirement.grantable is False
    assert joined.requirement.quorum == 2
    assert joined.requirement.escalate_after == timedelta(hours=1)
    # The ask declares no escalation: after it, its (default approver) role is still needed.
    assert joined.requirement.escalation_roles == frozenset({"cfo", "approver"})
    assert joined.requirement.roles == frozenset({"manager"})


def test_a_budget_ask_is_never_grantable_and_keeps_the_policies_options():
    alone = _with_reasons(None, ("over budget refunds",), "approver")
    assert (alone.reasons, alone.grantable, alone.quorum) == (("over budget refunds",), False, 1)

    part = ApprovalRequirement(
        reasons=("Big refund.",),
        roles=frozenset({"manager"}),
        expires_in=None,
        policies=("p",),
        quorum=2,
        distinct_roles=frozenset({"finance"}),
    )
    joined = _with_reasons(part, ("over budget refunds",), "approver")

    assert joined.reasons == ("Big refund.", "over budget refunds")
    assert joined.grantable is False
    assert (joined.quorum, joined.distinct_roles) == (2, frozenset({"finance"}))
    escalating = dataclasses.replace(
        part, escalate_after=timedelta(hours=1), escalation_roles=frozenset({"cfo"})
    )
    joined = _with_reasons(escalating, ("over budget refunds",), "approver")
    assert joined.escalation_roles == frozenset({"cfo", "approver"})  # the budget's ask's role
