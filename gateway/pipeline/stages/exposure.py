"""Stage 4 — exposure check (SI-1, SI-2, SI-8): `expose[surface]` must be exactly true for the
listener's fixed surface; anything else is indistinguishable from an unknown capability."""

from __future__ import annotations

from gateway.errors import not_found
from gateway.pipeline.call import Call, Runtime


async def check_exposure(call: Call, rt: Runtime) -> None:
    assert call.prepared is not None
    if not call.prepared.capability.exposed_on(call.surface):
        raise not_found("not-exposed")
