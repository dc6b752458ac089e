"""Stage 2 — execution identity: execution id, start time, `capability.requested`."""

from __future__ import annotations

from gateway.errors import Event
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.events import build


async def assign_execution_id(call: Call, rt: Runtime) -> None:
    call.execution_id = rt.new_id()
    call.started = rt.monotonic()
    # Before resolution, so that probing for hidden capabilities is itself audited.
    extra = {"approval_id": call.approval_id} if call.approval_id else {}
    rt.audit.emit(build(Event.REQUESTED, call, rt.wall(), **extra))
