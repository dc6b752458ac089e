"""Stage 6 — actor check (SI-3): an actor with id and kind must be present; anonymous access
is the explicit kind `anonymous`, never a missing actor."""

from __future__ import annotations

from gateway.errors import CapabilityError, Code
from gateway.pipeline.call import Call, Runtime

_KINDS = frozenset({"user", "service", "agent", "anonymous"})


async def check_actor(call: Call, rt: Runtime) -> None:
    actor = call.actor
    if actor is None or not actor.id or actor.kind not in _KINDS:
        raise CapabilityError(Code.UNAUTHENTICATED, reason="no well-formed actor")
