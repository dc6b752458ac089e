"""Stage 3 — resolve the capability id in the snapshot's registry."""

from __future__ import annotations

from gateway.errors import not_found
from gateway.pipeline.call import Call, Runtime


async def resolve_capability(call: Call, rt: Runtime) -> None:
    prepared = call.snapshot.capabilities.get(call.capability_id)
    if prepared is None:
        raise not_found("unknown")
    call.prepared = prepared
