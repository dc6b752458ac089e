"""A `tools/call` through the pipeline: every name, known or not, enters it (stage 2 audits the
probe, SI-8), and a caller's cancellation is answered with what the runner recorded.

- A tool name that names no capability here runs `UNKNOWN_TOOL_STAGES`: stage 2 (execution id,
  `capability.requested`) and a stage 3 that resolves nothing, so the probe ends in
  `capability.denied` (CAPABILITY_NOT_FOUND, reason `unknown`) exactly as gRPC's Invoke of an
  unknown id; the trail's `capability_id` is the tool name the caller sent.
- `run` answers a call its caller cancelled (`notifications/cancelled` or a disconnect, ADR
  0039) with what the runner recorded, for a client that is still listening: the outcome of a
  call whose upstream had answered (it finishes on its own task: completed, or a failure of
  stages 12-13), the outcome being settled when the stages had ended (an approval request, a
  replay, a failure), and otherwise CANCELLED with the execution's truthful state (the runner
  recorded `capability.cancelled` on its caller-cancel path and re-raised).
"""

from __future__ import annotations

import asyncio
from typing import Final

from capgate.v1 import gateway_pb2, types_pb2
from gateway.errors import CapabilityError, Code, not_found
from gateway.pipeline import envelope
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call, Runtime
from gateway.upstream.call import rerun_safe


async def no_such_tool(call: Call, rt: Runtime) -> None:
    """Stage 3 for a tool name that resolves to no capability on this listener: not a tool
    here, never one, or left out for a name clash. Concealed like every not-found (SI-8)."""
    raise not_found("unknown")


UNKNOWN_TOOL_STAGES: Final = (pipeline.INVOKE[0], pipeline.Stage(3, "resolve-tool", no_such_tool))


async def run(
    call: Call, rt: Runtime, stages: tuple[pipeline.Stage, ...]
) -> gateway_pb2.ExecutionResult:
    """The runner's envelope; for a call its caller cancelled, the CANCELLED envelope the runner
    recorded (it re-raises instead of answering: on gRPC nobody is left to answer)."""
    try:
        return await pipeline.run(call, rt, stages)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # this task exists to run the request: its answer is this envelope
        if call.finishing is not None:
            # The upstream had answered: the call finished on its own task (completed, or a
            # failure of stages 12-13), and that is what the trail says; answer the same.
            answer: gateway_pb2.ExecutionResult = await asyncio.shield(call.finishing)
            return answer
        if call.result is not None:
            # The stages had ended (suspended, replayed, failed): the outcome being settled.
            settled: gateway_pb2.ExecutionResult = call.result
            return settled
        return cancelled(call)


def cancelled(call: Call) -> gateway_pb2.ExecutionResult:
    """The envelope of `pipeline.run`'s caller-cancel path, built from the same call."""
    err = CapabilityError(
        Code.CANCELLED,
        reason="caller cancelled",
        executed=call.state == types_pb2.EXECUTION_STATE_COMPLETED,
    )
    return envelope.failure(
        err,
        execution_id=call.execution_id,
        capability_id=call.capability_id,
        attempts=call.attempts,
        duration_s=None,  # the runner's own clock read is in the trail's event
        state=call.state,
        revision=call.snapshot.revision,
        approval_id=call.approval_id if call.approval is not None else "",
        rerun_safe=call.prepared is not None and rerun_safe(call.prepared.capability),
    )
