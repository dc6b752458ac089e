"""Each hook call is a CLIENT span (`agent.hook`) under the execution's root span, read from an
in-memory exporter of the real gateway (tracing on)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.hooks.conftest import hooked_config
from tests.hooks.script import Script
from tests.hooks.test_hooks_pipeline import cid

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def traced(
    orders: str,
    hook_server: str,
    crasher: str,
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Env, InMemorySpanExporter]]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    config = hooked_config(tmp_path_factory.mktemp("traced"), {"telemetry": {"tracing": True}})
    environ = {
        **gateway_environ(orders, redis_server.url, run_dir),
        "TEST_HOOKS_ADDR": hook_server,
        "TEST_CRASHER_ADDR": crasher,
    }
    spans = InMemorySpanExporter()
    gw = await start(
        load_settings(config, environ=environ),
        extra_sinks=[MemorySink()],
        span_processors=[SimpleSpanProcessor(spans)],
    )
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/x.sock")
    yield env, spans
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


async def test_each_hook_call_is_a_client_span_of_the_execution(
    traced: tuple[Env, InMemorySpanExporter], script: Script
) -> None:
    env, spans = traced
    key = cid()
    script.pre[key] = "slow"  # the guard fails closed: its span ends in error
    ok = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 1})
    failed = await env.invoke("orders.get", {"order_id": "o-1001"}, correlation_id=key)
    assert ok.WhichOneof("outcome") == "completed" and failed.WhichOneof("outcome") == "failed"
    finished = spans.get_finished_spans()
    for result, expected in (
        (ok, [("standing", "PreInvoke"), ("guard", "PreInvoke"), ("guard", "PostInvoke")]),
        (failed, [("guard", "PreInvoke"), ("guard", "PostFailure")]),
    ):
        root = next(
            s
            for s in finished
            if s.name == "agent.capability_call"
            and (s.attributes or {}).get("capgate.execution_id") == result.execution_id
        )
        mine = sorted(
            (
                s
                for s in finished
                if s.name == "agent.hook"
                and s.parent is not None
                and s.parent.span_id == root.context.span_id
            ),
            key=lambda s: s.start_time or 0,
        )
        seen = [(s.attributes["capgate.hook"], s.attributes["rpc.method"]) for s in mine]
        assert seen == expected
        assert {s.kind for s in mine} == {SpanKind.CLIENT}
        assert all(s.attributes["rpc.service"] == "capgate.v1.Hook" for s in mine)
    slow = next(
        s
        for s in finished
        if s.name == "agent.hook"
        and s.attributes.get("capgate.hook") == "guard"
        and s.status.status_code is StatusCode.ERROR
    )
    assert slow.status.description == "status DEADLINE_EXCEEDED"
