"""One call's CEL variables, built once and reused (DESIGN §11: once per request).

Policies (the input-free hide at stage 4, the concealment checks before the journal and the
hooks, stage 7, stage 9), limits, the cache scope key and map_input all read the same
variables. Each view of them is built on first use and kept on the `Call`:

- `INPUT_FREE`: invocation phase, `input` unbound (the stage 4 hide, the cache scope key);
- `INVOCATION`: invocation phase with the input (policies before and at stage 7, limits,
  map_input);
- `EXECUTION`: execution phase, with `approval` and `limits` (stage 9).

A view is built again when what it binds changed: `forget(call)` after the input is validated
or replaced by a hook and after a hook adds context; the input's identity and, for
EXECUTION, the approval and limit state are checked too, so a stage that forgets to forget
still never reads stale variables. `request.now` is read when a view is built.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from gateway.pipeline.call import Call, Runtime
from policy import EvalRequest, Evaluation, Phase
from policy.bindings import bindings_for

if TYPE_CHECKING:
    from gateway.state.approvals.grants import GrantSpec

__all__ = [
    "View",
    "activation",
    "eval_request",
    "evaluate",
    "forget",
    "request",
    "variables",
]


class View(Enum):
    INPUT_FREE = "input-free"
    INVOCATION = "invocation"
    EXECUTION = "execution"


_PHASE = {
    View.INPUT_FREE: Phase.INVOCATION,
    View.INVOCATION: Phase.INVOCATION,
    View.EXECUTION: Phase.EXECUTION,
}


@dataclasses.dataclass(slots=True)
class _Bound:
    stamp: tuple[Any, ...]  # what the view was built from: rebuilt when it differs
    request: EvalRequest
    variables: dict[str, Any] | None = None
    activation: Any = None


def eval_request(call: Call, rt: Runtime, *, with_input: bool, approval: Any = None) -> EvalRequest:
    """A fresh policy request for `call` (the views below keep theirs)."""
    assert call.prepared is not None and call.actor is not None
    allow = call.snapshot.settings.defaults.metadata_allowlist
    return EvalRequest(
        actor=call.actor.as_policy_value(),
        capability=call.prepared.policy_value,
        capability_policies=call.prepared.capability.policies,
        surface=call.surface,
        input=call.input if with_input else None,
        now=datetime.fromtimestamp(rt.wall(), UTC),
        correlation_id=call.correlation_id,
        metadata={k: v for k, v in call.metadata.items() if k in allow},
        approval=approval,
        hooks=call.hook_context,  # the pre-hooks' context attributes (docs/hooks.md)
    )


def forget(call: Call) -> None:
    """What the views bind changed (input validated or replaced, a hook's context added)."""
    call.bound.clear()


def request(call: Call, rt: Runtime, view: View) -> EvalRequest:
    """The view's policy request, built once."""
    return _bound(call, rt, view).request


def variables(call: Call, rt: Runtime, view: View) -> dict[str, Any]:
    """The view's backend-neutral variables (no policy constants), built once; for the
    gateway's own expressions (cache scope key, map_input), which copy what they convert."""
    bound = _bound(call, rt, view)
    if bound.variables is None:
        req = bound.request
        assert req.now is not None
        bound.variables = bindings_for(_PHASE[view], req, req.now, {})
    return bound.variables


def activation(call: Call, rt: Runtime, view: View) -> Any:
    """The view's activation by the snapshot's policy set (its constants bound), built once:
    every policy evaluation of the view, and limits, evaluate against it."""
    bound = _bound(call, rt, view)
    if bound.activation is None:
        bound.activation = call.snapshot.policies.activation(_PHASE[view], bound.request)
    return bound.activation


def evaluate(
    call: Call, rt: Runtime, view: View, *, input_free: bool = False, without_hooks: bool = False
) -> Evaluation:
    """The snapshot's policies of the view's phase (those `input_free` or `without_hooks`
    select) against the call's activation of the view."""
    return call.snapshot.policies.evaluate_all(
        _PHASE[view],
        request(call, rt, view),
        input_free=input_free,
        without_hooks=without_hooks,
        activation=activation(call, rt, view),
    )


def _bound(call: Call, rt: Runtime, view: View) -> _Bound:
    stamp = _stamp(call, view)
    found: _Bound | None = call.bound.get(view.value)
    if found is not None and found.stamp == stamp:
        return found
    req = eval_request(
        call,
        rt,
        with_input=view is not View.INPUT_FREE,
        approval=_approval(call) if view is View.EXECUTION else None,
    )
    if view is View.EXECUTION and call.limit_state is not None:
        # The limit script ran before stage 8: its state, no extra trip.
        req = dataclasses.replace(req, limits=call.limit_state)
    built = _Bound(stamp, req)
    call.bound[view.value] = built
    return built


def _stamp(call: Call, view: View) -> tuple[Any, ...]:
    if view is View.INPUT_FREE:
        return ()
    if view is View.INVOCATION:
        return (id(call.input),)
    return (id(call.input), id(call.approval), id(call.grant), id(call.limit_state))


def _approval(call: Call) -> dict[str, Any] | None:
    """`approval` of the execution phase: the decided approval this call runs under, or the
    standing grant that stood in for one (ADR 0038) in the same shape, with `grant` telling
    them apart, so an execution policy about approvals never lets a grant's use slip by."""
    if call.grant is not None:
        return _granted(call.grant)
    record = call.approval
    if record is None or record.decided_by is None:
        return None
    return {
        "id": record.id,
        "approver": record.decided_by.as_policy_value(),
        "decided_at": datetime.fromtimestamp(record.decided_at or 0, UTC),
        "reasons": list(record.reasons),
        "grant": False,
    }


def _granted(grant: GrantSpec) -> dict[str, Any]:
    """A grant's use as `approval`: its id, its creator holding the roles it was made with,
    decided when it was created."""
    return {
        "id": grant.id,
        "approver": {
            "id": grant.creator_id,
            "issuer": grant.creator_issuer,
            "roles": list(grant.approver_roles),
        },
        "decided_at": datetime.fromtimestamp(grant.created_at, UTC),
        "reasons": [],
        "grant": True,
    }
