"""One hook call: bounded by the hook's timeout and the caller's deadline, traced as a CLIENT
span (`agent.hook`), counted in metrics (hook name, RPC, result: bounded by the config), and
recorded for the audit trail (name, RPC, decision, duration, error; never payloads, SI-10).

`HookFault` is a hook that did not answer usably (an RPC error, a missed deadline, an answer
that breaks the contract); the stages decide what it means from the hook's failure mode.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import Message
from opentelemetry.trace import SpanKind, Status, StatusCode

from capgate.v1 import hook_pb2, types_pb2
from gateway.config.hookspec import BoundHook, HookCall, HookSpec
from gateway.pipeline.call import Call, Runtime
from gateway.telemetry import child_span, metrics, traceparent

if TYPE_CHECKING:
    from gateway.pipeline.snapshot import Prepared

__all__ = ["HookFault", "call_hook", "hook_context"]

# Kept free before the caller's deadline, besides defaults.deadline_margin: after a hook missed
# it, the failure hooks, the audit event and the envelope still have to go out in time.
ANSWER_RESERVE_S = 0.1
_RPC_NAMES: dict[HookCall, str] = {
    "pre_invoke": "PreInvoke",
    "post_invoke": "PostInvoke",
    "post_failure": "PostFailure",
}
_RESPONSES: dict[HookCall, type[Message]] = {
    "pre_invoke": hook_pb2.PreInvokeResponse,
    "post_invoke": hook_pb2.PostInvokeResponse,
    "post_failure": hook_pb2.PostFailureResponse,
}


class HookFault(Exception):
    """The hook gave no usable answer; `cause` is safe for the trail (a status name or a
    contract rule, never the hook's free text or a value)."""

    def __init__(self, hook: str, cause: str) -> None:
        super().__init__(f"hook {hook}: {cause}")
        self.hook = hook
        self.cause = cause


def hook_context(
    call: Call, hook: HookSpec, *, dry_run: bool = False, prepared: Prepared | None = None
) -> hook_pb2.HookContext:
    """What every hook call carries: ids, the capability, the actor, allowlisted metadata."""
    prepared = prepared or call.prepared
    assert prepared is not None
    cap = prepared.capability
    allow = call.snapshot.settings.defaults.metadata_allowlist
    ctx = hook_pb2.HookContext(
        hook=hook.name,
        execution_id=call.execution_id,
        capability=hook_pb2.HookCapability(
            id=cap.id, tags=list(cap.tags), side_effect=cap.side_effect, risk=cap.risk
        ),
        surface=call.surface,
        correlation_id=call.correlation_id,
        metadata={k: v for k, v in call.metadata.items() if k in allow},
        approval_id=call.approval_id,
        dry_run=dry_run,
        revision=call.snapshot.revision,
    )
    actor = call.actor
    if actor is not None:
        ctx.actor.CopyFrom(
            types_pb2.Actor(id=actor.id, issuer=actor.issuer, kind=actor.kind, roles=actor.roles)
        )
    return ctx


def remaining_s(call: Call, rt: Runtime) -> float | None:
    """Seconds left before the caller's deadline (less the margin), None without one. Not the
    capability's timeout, which bounds the upstream call: a PostFailure after a TIMEOUT still
    runs while the caller waits."""
    if call.caller_remaining_s is None:
        return None
    margin = call.snapshot.settings.defaults.deadline_margin_s + ANSWER_RESERVE_S
    return call.started + call.caller_remaining_s - margin - rt.monotonic()


async def call_hook(
    call: Call,
    rt: Runtime,
    hook: BoundHook,
    rpc: HookCall,
    request: Message,
    *,
    describe: Callable[[Any], str],
) -> Any:
    """Call `rpc` of `hook` with `request`; the answer, or `HookFault`. `describe` names the
    answer's decision for the trail (`allow`, `deny`, `updated_output`, ...)."""
    spec = hook.spec
    timeout = spec.timeout_s
    left = remaining_s(call, rt)
    if left is not None:
        timeout = min(timeout, left)
    method: Callable[..., Awaitable[Any]] = getattr(hook.stub, _RPC_NAMES[rpc])
    attributes = {
        "rpc.system": "grpc",
        "rpc.service": "capgate.v1.Hook",
        "rpc.method": _RPC_NAMES[rpc],
        "capgate.hook": spec.name,
    }
    record: dict[str, Any] = {"hook": spec.name, "call": rpc}
    started = time.perf_counter()
    result = "ok"
    with child_span("agent.hook", SpanKind.CLIENT, attributes) as span:
        try:
            if timeout <= 0:
                raise HookFault(spec.name, "no time left before the caller's deadline")
            try:
                answer = await method(request, timeout=timeout, metadata=traceparent())
            except grpc.aio.AioRpcError as err:
                # Only the status name: a hook's details text may carry payload fragments.
                raise HookFault(spec.name, f"status {err.code().name}") from None
            except Exception as err:  # a closed channel (a reload), a usage error, ...
                # Only the type: the hook's failure mode decides, as for any other fault.
                raise HookFault(spec.name, f"call failed ({type(err).__name__})") from None
            expected = _RESPONSES[rpc]
            if not isinstance(answer, expected):
                # grpc.aio logs a response deserializer's error and returns None: bytes that
                # are not the response message are a broken answer, under the failure mode.
                raise HookFault(spec.name, f"answer is not a {expected.DESCRIPTOR.name}")
            record["decision"] = describe(answer)
            return answer
        except HookFault as fault:
            result = "error"
            record["error"] = fault.cause
            if span.is_recording():
                span.set_status(Status(StatusCode.ERROR, fault.cause))
            raise
        finally:
            elapsed = time.perf_counter() - started
            record["duration_ms"] = round(elapsed * 1000, 3)
            call.hook_calls.append(record)
            metrics.hook_duration.observe(elapsed, (spec.name, rpc, result))


def fault_in(call: Call, fault: HookFault) -> None:
    """A hook's answer broke the contract after it arrived: mark its trail record."""
    for record in reversed(call.hook_calls):
        if record["hook"] == fault.hook:
            record["error"] = fault.cause
            break
    metrics.hook_faults.add((fault.hook,))
