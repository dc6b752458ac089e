"""What the example upstream saw: calls per method, forwarded ids, cancellations.

Tests read it in-process (`Recorder`) or over gRPC (`orders.v1.Control/GetStats`). Only ids
from forwarded metadata are kept, never payloads or the actor token itself. When a JWKS is
configured, every call must carry a valid gateway-signed actor token for this upstream,
verified with `capgate_client.server` as an upstream's own middleware would.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from examples.orders import orders_pb2 as pb
from examples.orders.book import Refusal

LOG_SIZE = 1000
FORWARDED = {
    "x-capgate-execution-id": "execution_id",
    "x-capgate-capability": "capability",
    "x-capgate-surface": "surface",
    "x-capgate-idempotency-key": "idempotency_key",
    "x-capgate-approval-id": "approval_id",
    "x-capgate-correlation-id": "correlation_id",
    "traceparent": "traceparent",
}


class Recorder:
    """Counts and a bounded log of calls; verifies actor tokens when given a verifier."""

    def __init__(self, verifier: Any = None) -> None:
        self.verifier = verifier  # capgate_client.server.ActorTokenVerifier or None
        self.calls: Counter[str] = Counter()
        self.cancelled: Counter[str] = Counter()
        self.log: deque[pb.CallRecord] = deque(maxlen=LOG_SIZE)
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def reset(self) -> None:
        self.calls.clear()
        self.cancelled.clear()
        self.log.clear()

    def begin(self, method: str, context: grpc.aio.ServicerContext) -> pb.CallRecord:
        """Count and log the call; refuse it when the actor token does not verify."""
        metadata: Mapping[str, str] = {
            key: value
            for key, value in (context.invocation_metadata() or ())
            if isinstance(value, str)
        }
        record = pb.CallRecord(method=method)
        for key, field in FORWARDED.items():
            setattr(record, field, metadata.get(key, ""))
        token = metadata.get("x-capgate-actor-token")
        record.actor_token_present = token is not None
        self.calls[method] += 1
        self.log.append(record)
        self._wake()
        if self.verifier is not None:
            self._verify(record, token)
        return record

    def _verify(self, record: pb.CallRecord, token: str | None) -> None:
        from capgate_client.actor_token import ActorTokenInvalid  # noqa: PLC0415 - only with a JWKS

        if token is None:
            raise Refusal(grpc.StatusCode.UNAUTHENTICATED, "actor token required")
        try:
            claims = self.verifier.verify(token)
        except ActorTokenInvalid as err:
            reason = f"actor token refused: {err.reason}"
            raise Refusal(grpc.StatusCode.UNAUTHENTICATED, reason) from None
        # The gateway reuses a token across executions (DESIGN §12, amended 2026-12-01): the
        # execution id and capability are metadata beside it; a token that names them (signed
        # before reuse) must agree with that metadata.
        if not record.execution_id or not record.capability:
            raise Refusal(grpc.StatusCode.UNAUTHENTICATED, "execution id and capability required")
        named = (claims.get("exec_id", record.execution_id), claims.get("cap", record.capability))
        if named != (record.execution_id, record.capability):
            raise Refusal(grpc.StatusCode.UNAUTHENTICATED, "actor token is for another call")
        record.actor_verified = True
        record.actor_id, record.actor_kind = claims["sub"], claims["kind"]

    def mark_cancelled(self, record: pb.CallRecord) -> None:
        record.cancelled = True  # the log holds this same message object
        self.cancelled[record.method] += 1
        self._wake()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition()` holds after a recorded change (bound it with a timeout):
        in-process tests wait for the server to see a call or a cancellation this way."""
        if condition():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (condition, future)
        self._waiters.append(waiter)
        try:
            await future
        finally:
            self._waiters.remove(waiter)

    def _wake(self) -> None:
        for condition, future in self._waiters:
            if not future.done() and condition():
                future.set_result(None)

    def stats(self) -> pb.Stats:
        return pb.Stats(calls=dict(self.calls), cancelled=dict(self.cancelled), log=list(self.log))

    def stats_json(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "cancelled": dict(self.cancelled),
            "log": [
                {
                    field: getattr(r, field)
                    for field in (
                        "method",
                        *FORWARDED.values(),
                        "actor_token_present",
                        "actor_verified",
                        "actor_id",
                        "actor_kind",
                        "cancelled",
                    )
                }
                for r in self.log
            ],
        }
