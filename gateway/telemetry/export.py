"""Metric exporters: a Prometheus scrape endpoint and periodic OTLP pushes, both reading one
snapshot of `gateway.telemetry.metrics` (cumulative since the process started).

Prometheus names follow the OpenTelemetry-to-Prometheus convention: dots become underscores,
seconds get `_seconds`, counters get `_total` (capgate.invocations → capgate_invocations_total).
The OTLP exporter is the standard one and reads the standard `OTEL_EXPORTER_OTLP_*` variables;
the push interval is `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds, default 60000).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from gateway.telemetry.instruments import Metrics, Snapshot

log = logging.getLogger("capgate.telemetry")

_CUMULATIVE = AggregationTemporality.CUMULATIVE
_SCOPE = InstrumentationScope("capgate")


def prometheus_name(snapshot: Snapshot) -> str:
    name = snapshot.name.replace(".", "_")
    return name + "_seconds" if snapshot.unit == "s" else name


class PrometheusCollector(Collector):
    """Translates a metrics snapshot into Prometheus families at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        for snap in self._metrics.snapshot():
            name, labels = prometheus_name(snap), list(snap.label_names)
            if snap.kind == "histogram":
                family: Any = HistogramMetricFamily(name, snap.description, labels=labels)
                for s in snap.series:
                    cumulative, buckets = 0, []
                    edges = [*map(repr, snap.bounds), "+Inf"]
                    for edge, count in zip(edges, s.buckets, strict=True):
                        cumulative += count
                        buckets.append((edge, cumulative))
                    family.add_metric(list(s.labels), buckets, s.total)
            else:
                cls = CounterMetricFamily if snap.kind == "counter" else GaugeMetricFamily
                family = cls(name, snap.description, labels=labels)
                for s in snap.series:
                    family.add_metric(list(s.labels), s.value)
            yield family


class PrometheusEndpoint:
    """`GET /metrics` on host:port (port 0 picks a free one; see `port`)."""

    def __init__(self, address: str, metrics: Metrics) -> None:
        host, _, port = address.rpartition(":")
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(PrometheusCollector(metrics))
        self._server, self._thread = start_http_server(
            int(port), addr=host.strip("[]") or "0.0.0.0", registry=self.registry
        )
        self.port: int = self._server.server_port

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def metrics_data(metrics: Metrics, resource: Resource, start_ns: int) -> MetricsData:
    """The snapshot as OTLP data points (cumulative temporality)."""
    now = time.time_ns()
    out: list[Metric] = []
    for snap in metrics.snapshot():
        if not snap.series:
            continue
        data: Any
        if snap.kind == "histogram":
            data = Histogram(
                [
                    HistogramDataPoint(
                        dict(zip(snap.label_names, s.labels, strict=True)),
                        start_ns,
                        now,
                        s.count,
                        s.total,
                        list(s.buckets),
                        list(snap.bounds),
                        s.minimum,
                        s.maximum,
                    )
                    for s in snap.series
                ],
                _CUMULATIVE,
            )
        else:
            points = [
                NumberDataPoint(
                    dict(zip(snap.label_names, s.labels, strict=True)), start_ns, now, s.value
                )
                for s in snap.series
            ]
            data = Sum(points, _CUMULATIVE, True) if snap.kind == "counter" else Gauge(points)
        out.append(Metric(snap.name, snap.description, snap.unit, data))
    return MetricsData([ResourceMetrics(resource, [ScopeMetrics(_SCOPE, out, "")], "")])


FINAL_PUSH_TIMEOUT_S = 2.0


class OtlpMetricsPusher:
    """Pushes the snapshot every interval from a background task (the export itself runs in a
    thread: the OTLP exporter is synchronous)."""

    def __init__(
        self,
        exporter: MetricExporter,
        metrics: Metrics,
        resource: Resource,
        interval_s: float | None = None,
    ) -> None:
        self._exporter = exporter
        self._metrics = metrics
        self._resource = resource
        self._start_ns = time.time_ns()
        self._lock = threading.Lock()
        self.interval_s = interval_s if interval_s is not None else _interval_from_env()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="otlp-metrics")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.push()

    async def push(self, timeout_s: float | None = None) -> None:
        data = metrics_data(self._metrics, self._resource, self._start_ns)
        try:
            await asyncio.to_thread(self._export, data, timeout_s)
        except Exception as exc:  # a collector outage must not stop the loop
            log.warning("OTLP metrics export failed: %s", type(exc).__name__)

    def _export(self, data: MetricsData, timeout_s: float | None) -> None:
        with self._lock:  # one export at a time (the final push may race the periodic one)
            if timeout_s is None:
                self._exporter.export(data)
            else:
                self._exporter.export(data, timeout_millis=timeout_s * 1000)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # Bounded: metrics are cumulative, the next process reports them again; a collector
        # that is down must not hold a terminating pod. The SDK's exporter does not honour the
        # export's timeout_millis (its retries run to its own 10 s deadline), so after
        # FINAL_PUSH_TIMEOUT_S the exporter is shut down: that closes its channel and ends the
        # retry's backoff wait, and the export thread returns at once.
        final = asyncio.ensure_future(self.push(timeout_s=FINAL_PUSH_TIMEOUT_S))
        await asyncio.wait({final}, timeout=FINAL_PUSH_TIMEOUT_S)
        await asyncio.to_thread(self._exporter.shutdown, timeout_millis=FINAL_PUSH_TIMEOUT_S * 1000)
        await final


def _interval_from_env() -> float:
    raw = os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "60000")
    try:
        return max(float(raw), 100.0) / 1000
    except ValueError:
        return 60.0
