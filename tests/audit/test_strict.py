"""Strict audit (`audit.strict: true`, seed 001 stage 10) through the real server: with the
Redis sink down the call fails with AUDIT_UNAVAILABLE and the upstream is never called; with it
up, `capability.started` is in the stream before the upstream runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis

from capgate.v1 import types_pb2
from gateway.config.settings import Settings
from gateway.state.embedded import RedisProcess
from gateway.telemetry import metrics
from tests.audit.kit import STREAM, stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def strict_redis_only(settings: Settings) -> Settings:
    """Strict audit to the Redis stream; nothing else of the gateway needs Redis."""
    return dataclasses.replace(
        settings,
        audit=dataclasses.replace(settings.audit, strict=True, sinks=("redis",)),
        approvals=dataclasses.replace(settings.approvals, enabled=False),
        idempotency=dataclasses.replace(settings.idempotency, enabled=False),
    )


async def test_strict_audit_with_the_redis_sink_down_refuses_before_the_upstream(
    orders_upstream: str, tmp_path: Path
) -> None:
    redis = RedisProcess(tmp_path / "redis").start()
    try:
        async with stack(orders_upstream, redis.url, change=strict_redis_only) as running:
            env = running.env
            ok = await env.invoke("orders.get", {"order_id": "o-1001"})
            assert ok.WhichOneof("outcome") == "completed"  # strict and healthy: runs
            redis.stop()
            await env.reset_upstream()
            dropped = metrics.audit_dropped.value(("redis", "sink_error"))
            result = await env.invoke("orders.get", {"order_id": "o-1001"})
            assert result.WhichOneof("outcome") == "failed", result
            error = result.failed
            assert error.code == types_pb2.ERROR_CODE_AUDIT_UNAVAILABLE
            assert error.retryable
            assert error.stage == "audit"
            assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
            assert await env.upstream_calls() == 0  # no audit record, no execution
            assert metrics.audit_dropped.value(("redis", "sink_error")) > dropped
            # The terminal event is written by the background drain: wait for it (bounded).
            events = await env.events_for(result.execution_id)
            assert [e["event"] for e in events] == [
                "capability.requested",
                "capability.started",
                "capability.failed",
            ]
            assert events[-1]["code"] == "AUDIT_UNAVAILABLE"
    finally:
        redis.stop()


async def test_strict_audit_records_started_before_the_upstream_runs(
    orders_upstream: str, redis_server: RedisProcess
) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    await client.delete(STREAM)
    try:
        async with stack(orders_upstream, redis_server.url, change=strict_redis_only) as running:
            env = running.env
            await env.reset_upstream()
            result = await env.invoke("orders.get", {"order_id": "slow-200"})
            assert result.WhichOneof("outcome") == "completed"  # answered after 200 ms
            assert await env.upstream_calls() == 1
            await running.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
        rows = [
            (entry_id.decode(), orjson.loads(fields[b"e"]))
            for entry_id, fields in await client.xrange(STREAM)
        ]
        mine = [
            (entry_id, e["event"])
            for entry_id, e in rows
            if e["execution_id"] == result.execution_id
        ]
        assert [name for _, name in mine] == [
            "capability.requested",
            "capability.started",
            "capability.completed",
        ]
        written_ms = {name: int(entry_id.split("-")[0]) for entry_id, name in mine}
        # `started` was in Redis before the 200 ms upstream call began, not written after it.
        assert written_ms["capability.completed"] - written_ms["capability.started"] >= 190
    finally:
        await client.aclose()
