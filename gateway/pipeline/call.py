"""Per-execution state and the runtime services stages use.

`Call` is the one mutable object of an execution: stages read what earlier stages produced and
add their own results. `Runtime` holds the long-lived, injected services (clock, ids, stores,
audit) so that tests can substitute deterministic ones (STYLE principle 5).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from capgate.v1 import types_pb2
from gateway.model import Actor
from gateway.pipeline.drain import Drain

if TYPE_CHECKING:
    from gateway.pipeline.snapshot import Prepared, Snapshot
    from policy import ApprovalRequirement, Evaluation


class Auditor(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...
    async def emit_strict(self, event: dict[str, Any]) -> None: ...


class Signer(Protocol):
    def sign(
        self,
        actor: Actor,
        *,
        upstream: str,
        surface: str,
        approval_id: str | None = None,
        approver: str | None = None,
        grant_id: str | None = None,
    ) -> str: ...


@dataclass
class Runtime:
    """Long-lived services shared by all executions; everything nondeterministic is injected."""

    audit: Auditor
    signer: Signer | None = None
    approvals: Any = None  # gateway.state.approvals.store.RedisApprovalStore | None
    idempotency: Any = None  # gateway.state.idempotency.RedisIdempotencyStore | None
    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    new_id: Callable[[], str] = field(default=lambda: os.urandom(16).hex())
    sleep: Callable[[float], Awaitable[None]] | None = None
    # Uniform draws in [0, 1) for retry backoff (full jitter, docs/upstreams.md §5): real
    # randomness by default, a fixed sequence in tests.
    jitter: Callable[[], float] = random.random
    drain: Drain = field(default_factory=Drain)  # calls in flight, answered at shutdown
    limiter: Any = None  # gateway.state.limits.store.RedisLimiter | None (docs/limits.md)
    cache: Any = None  # gateway.state.cache.ResultCache | None (docs/cache.md)
    grants: Any = None  # gateway.state.approvals.grants.RedisGrantStore | None (ADR 0038)


@dataclass(eq=False, slots=True)
class Call:
    """One execution: what the listener gave us and what each stage produced."""

    snapshot: Snapshot
    surface: str
    actor: Actor | None
    capability_id: str
    raw_input: bytes
    idempotency_key: str = ""
    correlation_id: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    caller_remaining_s: float | None = None  # from the gRPC deadline, at arrival
    traceparent: str = ""
    approval_id: str = ""  # set on Resume
    # produced by stages
    execution_id: str = ""
    started: float = 0.0  # monotonic
    prepared: Prepared | None = None
    input: Any = None
    input_hash: str = ""
    evaluation: Evaluation | None = None  # invocation phase (stage 7)
    # (the input it read, its evaluation): the invocation phase as decided before the pre-hooks
    # when no applicable policy can read what they add; stage 7 takes it for the same input.
    early_evaluation: tuple[Any, Evaluation] | None = None
    execution_evaluation: Evaluation | None = None  # execution phase (stage 9)
    requirement: ApprovalRequirement | None = None
    approval: Any = None  # gateway.state.approvals.records.ApprovalRecord on Resume
    # Set before the approval's consume is sent; cleared when the store answers that nothing
    # was consumed. Set while `approval` is still the approved record: the consume may have run
    # though its reply was lost (timeout, cancel), so a failure gives it back (pipeline.py).
    consume_attempted: bool = False
    # The idempotency journal (stages/controls.py): the hash of the input as validated, before
    # pre-hooks (the early read's and the claim's `request_hash`), and the key's scope, set
    # before the claim is sent: the runner releases it when nothing ran (issue 25).
    request_hash: str = ""
    idempotency_scope: Any = None
    deadline: float = 0.0  # monotonic, absolute
    attempts: int = 0
    output: Any = None
    state: types_pb2.ExecutionState = types_pb2.EXECUTION_STATE_NOT_STARTED
    denial_reason: str = ""
    # Limits (gateway/pipeline/stages/limits.py): what is left of each, for execution-phase
    # policies; `limits_deferred` when an over-budget call asks for approval and nothing was spent.
    limit_state: dict[str, dict[str, float]] | None = None
    limits_deferred: bool = False
    limits_inline: bool = False  # an inline approver approved it: this execution holds the spend
    limit_spent: tuple[
        Any, ...
    ] = ()  # gateway.state.limits.store.Spent: budgets given back if unrun
    # Requests to Redis whose answer the call stopped waiting for (a caller's cancel): the
    # limits' check (its charges and the shielded task) and an approval being stored. The
    # runner waits for their answers to give back what they took (pipeline._collect_unanswered).
    limits_unanswered: tuple[Any, Any] | None = None
    # The limits' charges whose check got no answer (a timeout, a dropped connection): its
    # receipt tells what it spent, given back if the call never ran.
    limits_lost: Any = None
    # (the record asked for, asyncio.Future[ApprovalRecord]) | None: set while it is stored,
    # left set when storing failed (the record may be there although the reply was lost).
    approval_creating: tuple[Any, Any] | None = None
    claiming: Any = None  # asyncio.Future[Claim] | None: the idempotency claim in Redis
    # The runner's answer, set before the outcome is settled (a surface whose caller cancelled
    # while it settled answers it: MCP), and the task running the stages after the upstream
    # answered (12-13) and the settlement: a caller's cancel no longer reaches them.
    result: Any = None  # gateway_pb2.ExecutionResult | None
    finishing: Any = None  # asyncio.Task[ExecutionResult] | None
    approval_released: bool = False  # this execution gave its approval back
    # Standing grants (gateway/pipeline/stages/grants.py, ADR 0038): the grant whose use this
    # call took (every event, the envelope and the actor token name it), the grant whose take
    # was sent (a failure gives its use back by receipt), and whether it was.
    grant_id: str = ""
    grant_taking: str = ""
    grant_released: bool = False
    # The covering grant's GrantSpec: its creator is the token's `approver`, and it is the
    # execution phase's `approval` (pipeline/bindings.py).
    grant: Any = None
    # The result cache (gateway/pipeline/stages/cache.py): "hit" or "miss" once looked up, and the
    # entry's key a miss stores the output under after stage 12.
    cache: str = ""
    cache_key: str = ""
    # Governance hooks (gateway/pipeline/stages/hooks.py, docs/hooks.md): each pre-hook's context
    # attributes (policies' `hooks`), the approval reasons of hooks that asked, the audit
    # records of every hook call, and the input change a hook made (both hashes).
    hook_context: dict[str, dict[str, Any]] = field(default_factory=dict)
    hook_asks: list[str] = field(default_factory=list)
    hook_calls: list[dict[str, Any]] = field(default_factory=list)
    input_update: dict[str, Any] | None = None
    dry_run: bool = False  # CapabilityGateway.Check: hooks are told nothing will run
    upstream_s: float = 0.0  # time in upstream attempts (stage 11), summed over retries
    # The audit events' input HMAC (gateway/audit/events.py), and the input it is of: a
    # hook that replaces `input` makes it stale, so it is recomputed for the new object.
    input_hmac: tuple[str, str] | None = None
    input_hmac_of: Any = None
    # The CEL variables and activations of this call, built once per view and reused by every
    # stage that evaluates an expression (gateway/pipeline/bindings.py); cleared whenever
    # what they bind changes (the validated input, a hook's context or updated input).
    bound: dict[str, Any] = field(default_factory=dict)
