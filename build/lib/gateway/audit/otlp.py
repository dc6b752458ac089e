"""The optional OTLP logs sink (`audit.sinks: [otlp]`): each audit event becomes one log record
whose body is the event and whose `event_name` is the event's name, sent with the standard
OTLP gRPC exporter (endpoint, headers and timeout from the `OTEL_EXPORTER_OTLP_*` variables).
A batch is exported in a worker thread (the exporter is synchronous); a failed export raises,
so the audit log counts the batch as dropped — or fails a strict write."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from gateway.telemetry.tracing import resource as default_resource

_SCOPE = InstrumentationScope("capgate.audit")


class OtlpExportFailed(Exception):
    """The collector did not accept the batch."""


def _clean(value: Any) -> Any:
    """OTLP AnyValue has no null: drop None members (an absent field means the same)."""
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value if v is not None]
    return value


class OtlpLogSink:
    name = "otlp"

    def __init__(
        self, exporter: LogRecordExporter | None = None, resource: Resource | None = None
    ) -> None:
        self._exporter = exporter if exporter is not None else OTLPLogExporter()
        self._resource = resource if resource is not None else default_resource()

    def _records(self, events: Sequence[dict[str, Any]]) -> list[ReadableLogRecord]:
        now = time.time_ns()
        return [
            ReadableLogRecord(
                LogRecord(
                    timestamp=now,
                    observed_timestamp=now,
                    body=_clean(event),
                    event_name=str(event.get("event", "")),
                    severity_number=SeverityNumber.INFO,
                    severity_text="INFO",
                ),
                resource=self._resource,
                instrumentation_scope=_SCOPE,
            )
            for event in events
        ]

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        result = await asyncio.to_thread(self._exporter.export, self._records(events))
        if result is not LogRecordExportResult.SUCCESS:
            raise OtlpExportFailed(self.name)

    async def close(self) -> None:
        await asyncio.to_thread(self._exporter.shutdown)
