"""A gateway for the audit and telemetry tests: the real server in-process (tests/audit/
gateway.yaml, variations by `dataclasses.replace`), the example upstream, a real Redis, an
in-memory span exporter and a memory audit sink next to the configured sinks."""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.config.settings import Settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

HERE = Path(__file__).parent
CONFIG = HERE / "gateway.yaml"
STREAM = "capgate-audit-test:audit"
TERMINAL = frozenset(
    {
        "capability.completed",
        "capability.failed",
        "capability.cancelled",
        "capability.denied",
        "capability.approval_requested",
    }
)


@dataclass
class Stack:
    env: Env
    spans: InMemorySpanExporter
    settings: Settings

    @property
    def memory(self) -> MemorySink:
        return self.env.audit

    def spans_of(self, execution_id: str) -> list[ReadableSpan]:
        """Every span of the trace holding the execution's agent.capability_call."""
        finished = self.spans.get_finished_spans()
        roots = [
            s
            for s in finished
            if s.name == "agent.capability_call"
            and (s.attributes or {}).get("capgate.execution_id") == execution_id
        ]
        assert len(roots) == 1, [s.name for s in finished]
        trace_id = roots[0].context.trace_id
        return [s for s in finished if s.context.trace_id == trace_id]

    async def events(self, execution_id: str) -> list[dict[str, Any]]:
        return await self.env.events_for(execution_id)

    async def scrape(self) -> str:
        telemetry = self.env.gw.telemetry
        assert telemetry is not None
        assert telemetry.prometheus_port
        url = f"http://127.0.0.1:{telemetry.prometheus_port}/metrics"

        def get() -> str:
            with urllib.request.urlopen(url, timeout=5) as reply:  # loopback only
                body: bytes = reply.read()
                return body.decode()

        return await asyncio.to_thread(get)


def settings_for(
    orders: str,
    redis_url: str,
    run_dir: str,
    *,
    change: Callable[[Settings], Settings] | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    env = {**gateway_environ(orders, redis_url, run_dir), **(environ or {})}
    settings = load_settings(CONFIG, environ=env)
    return change(settings) if change is not None else settings


def audit_settings(settings: Settings, **changes: Any) -> Settings:
    return dataclasses.replace(settings, audit=dataclasses.replace(settings.audit, **changes))


@asynccontextmanager
async def stack(
    orders: str,
    redis_url: str,
    *,
    change: Callable[[Settings], Settings] | None = None,
    environ: dict[str, str] | None = None,
) -> AsyncIterator[Stack]:
    run_dir = tempfile.mkdtemp(prefix="cg-")  # short: unix socket paths are limited
    settings = settings_for(orders, redis_url, run_dir, change=change, environ=environ)
    spans = InMemorySpanExporter()
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory], span_processors=[SimpleSpanProcessor(spans)])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    try:
        yield Stack(env=env, spans=spans, settings=settings)
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)


@pytest.fixture(scope="module")
async def audited(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Stack]:
    """The audited gateway, one per module (so its tracer is installed only while its tests
    run), on an empty audit stream. Shared by the audit and telemetry tests' conftests."""
    client = aioredis.Redis.from_url(redis_server.url)
    await client.delete(STREAM)
    await client.aclose()
    async with stack(orders_upstream, redis_server.url) as running:
        yield running
