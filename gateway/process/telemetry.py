"""Starting and stopping telemetry for one gateway: tracer provider, exporters, SERVER spans.

`telemetry.tracing` turns span creation on, but spans are created only when something will
receive them (OTLP via `telemetry.otlp`, or processors handed in by tests); without one the
pipeline keeps the no-op path and passes the caller's `traceparent` through. Metrics are always
recorded (a dict update each); `telemetry.prometheus_address` serves them for scraping and
`telemetry.otlp` pushes them. OTLP endpoints, headers, timeouts and the sampler come from the
standard `OTEL_*` environment variables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from gateway.config.settings import TelemetrySettings
from gateway.process.tasks import cancel_all
from gateway.state.connections import raise_if_cancelling
from gateway.telemetry import tracing
from gateway.telemetry.export import OtlpMetricsPusher, PrometheusEndpoint
from gateway.telemetry.instruments import Gauge, metrics
from gateway.telemetry.servicers import traced_servicer

log = logging.getLogger("capgate.telemetry")


@dataclass
class Telemetry:
    """What `start_telemetry` started; `close()` flushes and restores the previous tracer."""

    provider: TracerProvider | None = None
    prometheus: PrometheusEndpoint | None = None
    pusher: OtlpMetricsPusher | None = None
    previous: trace.Tracer | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def prometheus_port(self) -> int | None:
        return self.prometheus.port if self.prometheus is not None else None

    def traced(self) -> Callable[[Any, str], Any] | None:
        """Wraps a servicer with SERVER spans when tracing is on; None leaves servicers as is."""
        return traced_servicer if self.provider is not None else None

    def watch_gauge(
        self, gauge: Gauge, fetch: Callable[[], Awaitable[float]], interval_s: float = 5.0
    ) -> None:
        """Poll `fetch` into `gauge` while an exporter can read it."""
        if self.prometheus is None and self.pusher is None:
            return
        self.tasks.append(
            asyncio.get_running_loop().create_task(
                _poll(gauge, fetch, interval_s), name=f"gauge {gauge.name}"
            )
        )

    async def close(self) -> None:
        await cancel_all(self.tasks)
        if self.provider is not None:
            tracing.install(self.previous)
            await asyncio.to_thread(self.provider.shutdown)  # flushes batched spans
        if self.pusher is not None:
            await self.pusher.close()
        if self.prometheus is not None:
            await asyncio.to_thread(self.prometheus.close)


async def _poll(gauge: Gauge, fetch: Callable[[], Awaitable[float]], interval_s: float) -> None:
    while True:
        try:
            gauge.set(float(await fetch()))
        except Exception as exc:  # a Redis blip leaves the last value
            log.debug("gauge %s not refreshed: %s", gauge.name, type(exc).__name__)
            raise_if_cancelling()
        await asyncio.sleep(interval_s)


def start_telemetry(
    settings: TelemetrySettings, *, span_processors: Sequence[SpanProcessor] = ()
) -> Telemetry:
    """Build the tracer provider and metric exporters for `settings` (inside a running loop).

    What can fail (binding the Prometheus port) comes first, and the tracer is installed last,
    so that a failed start leaves nothing running and the previous tracer in place."""
    out = Telemetry()
    if settings.prometheus_address:
        out.prometheus = PrometheusEndpoint(settings.prometheus_address, metrics)
    if settings.otlp:
        out.pusher = OtlpMetricsPusher(OTLPMetricExporter(), metrics, tracing.resource())
        out.pusher.start()
    processors = list(span_processors)
    if settings.tracing and settings.otlp:
        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    if settings.tracing and processors:
        out.provider = tracing.build_provider(processors)
        out.previous = tracing.install(out.provider.get_tracer(tracing.SCOPE))
    return out
