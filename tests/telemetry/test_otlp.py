"""OTLP export to a real receiver: a grpc.aio server on loopback built here from
`opentelemetry-proto` (trace, metrics and logs collector services). The gateway is configured
only by `telemetry.otlp: true`, `audit.sinks: [otlp]` and the standard OTEL_* variables."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from gateway.config.settings import Settings
from gateway.state.embedded import RedisProcess
from tests.audit.kit import stack

pytestmark = pytest.mark.integration


@dataclass
class Receiver(
    trace_service_pb2_grpc.TraceServiceServicer,
    metrics_service_pb2_grpc.MetricsServiceServicer,
    logs_service_pb2_grpc.LogsServiceServicer,
):
    spans: list[Any] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    resources: list[Any] = field(default_factory=list)

    async def Export(self, request: Any, context: Any) -> Any:
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            for rs in request.resource_spans:
                self.resources.append(rs.resource)
                self.spans += [s for ss in rs.scope_spans for s in ss.spans]
            return trace_service_pb2.ExportTraceServiceResponse()
        if isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest):
            self.metrics += [
                m for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            ]
            return metrics_service_pb2.ExportMetricsServiceResponse()
        self.logs += [
            r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records
        ]
        return logs_service_pb2.ExportLogsServiceResponse()


def _handlers(receiver: Receiver) -> list[grpc.GenericRpcHandler]:
    services = (
        (
            "opentelemetry.proto.collector.trace.v1.TraceService",
            trace_service_pb2.ExportTraceServiceRequest,
            trace_service_pb2.ExportTraceServiceResponse,
        ),
        (
            "opentelemetry.proto.collector.metrics.v1.MetricsService",
            metrics_service_pb2.ExportMetricsServiceRequest,
            metrics_service_pb2.ExportMetricsServiceResponse,
        ),
        (
            "opentelemetry.proto.collector.logs.v1.LogsService",
            logs_service_pb2.ExportLogsServiceRequest,
            logs_service_pb2.ExportLogsServiceResponse,
        ),
    )
    return [
        grpc.method_handlers_generic_handler(
            name,
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    receiver.Export,
                    request_deserializer=req.FromString,
                    response_serializer=resp.SerializeToString,
                )
            },
        )
        for name, req, resp in services
    ]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, int]]:
    found = Receiver()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(_handlers(found))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield found, port
    await server.stop(0)


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _otlp(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings,
        telemetry=dataclasses.replace(settings.telemetry, otlp=True, prometheus_address=None),
        audit=dataclasses.replace(settings.audit, sinks=("otlp",)),
    )


async def test_spans_metrics_and_audit_logs_reach_an_otlp_receiver(
    receiver: tuple[Receiver, int],
    orders_upstream: str,
    redis_server: RedisProcess,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found, port = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "capgate-otlp-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    async with stack(orders_upstream, redis_server.url, change=_otlp) as running:
        result = await running.env.invoke("orders.get", {"order_id": "o-1001"})
        assert result.WhichOneof("outcome") == "completed"
    # stop() flushed the batch span processor, pushed the metrics and drained the audit log.
    names = {s.name for s in found.spans}
    assert {
        "capgate.v1.CapabilityGateway/Invoke",
        "agent.capability_call",
        "agent.policy_evaluation",
        "agent.procedure_execution",
    } <= names
    service = {
        kv.value.string_value
        for r in found.resources
        for kv in r.attributes
        if kv.key == "service.name"
    }
    assert service == {"capgate-otlp-test"}
    root = next(s for s in found.spans if s.name == "agent.capability_call")
    attributes = {kv.key: _value(kv.value) for kv in root.attributes}
    assert attributes["capgate.execution_id"] == result.execution_id

    metric_names = {m.name for m in found.metrics}
    assert {
        "capgate.invocations",
        "capgate.stage.duration",
        "capgate.upstream.duration",
    } <= metric_names
    calls = next(m for m in found.metrics if m.name == "capgate.invocations")
    assert calls.sum.is_monotonic
    assert calls.sum.data_points

    events = [_value(r.body) for r in found.logs]
    mine = [e for e in events if e.get("execution_id") == result.execution_id]
    assert [e["event"] for e in mine] == [
        "capability.requested",
        "capability.started",
        "capability.completed",
    ]
    assert {r.event_name for r in found.logs} >= {"capability.requested", "capability.completed"}
    assert mine[-1]["input_hmac_key_id"] == "test-k1"
    assert "actor_id" in mine[-1]
