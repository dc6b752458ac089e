"""The in-process metric instruments and their OTLP form; the sampler read from OTEL_*."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.metrics.export import AggregationTemporality, Gauge, Histogram, Sum
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from gateway.config.settings import TelemetrySettings
from gateway.process.telemetry import Telemetry, start_telemetry
from gateway.telemetry import enabled
from gateway.telemetry.export import metrics_data
from gateway.telemetry.instruments import (
    OTHER,
    Counter,
    Metrics,
)
from gateway.telemetry.instruments import (
    Gauge as GaugeInstrument,
)
from gateway.telemetry.instruments import (
    Histogram as Hist,
)
from gateway.telemetry.tracing import sampler_from_env


def test_a_counter_sums_per_label_set() -> None:
    counter = Counter("t.calls", "", "{call}", ("outcome",))
    counter.add(("completed",))
    counter.add(("completed",), 2)
    counter.add(("failed",))
    assert counter.value(("completed",)) == 3
    assert counter.value(("failed",)) == 1


def test_label_sets_beyond_the_cap_fold_into_one_series(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.telemetry.instruments.MAX_SERIES", 3)
    counter = Counter("t.calls", "", "{call}", ("capability", "code"))
    hist = Hist("t.lat", "", "s", ("capability",))
    for i in range(10):
        counter.add((f"cap-{i}", "OK"))
        hist.observe(0.001, (f"cap-{i}",))
    snap = counter.snapshot()
    assert len(snap.series) == 4
    assert counter.value((OTHER, OTHER)) == 7
    assert hist.count((OTHER,)) == 7
    assert len(hist.snapshot().series) == 4


def test_a_histogram_keeps_buckets_sum_min_and_max() -> None:
    hist = Hist("t.lat", "", "s", ("stage",), bounds=(0.001, 0.01, 0.1))
    for v in (0.0005, 0.001, 0.002, 0.05, 3.0):
        hist.observe(v, ("s",))
    (series,) = hist.snapshot().series
    assert series.buckets == (2, 1, 1, 1)  # le=0.001 is inclusive; 3.0 lands in +Inf
    assert series.count == 5
    assert series.total == pytest.approx(3.0535)
    assert (series.minimum, series.maximum) == (0.0005, 3.0)


def test_a_gauge_holds_the_last_value() -> None:
    gauge = GaugeInstrument("t.pending", "", "{approval}", ())
    gauge.set(4)
    gauge.set(2)
    assert gauge.value() == 2
    assert gauge.snapshot().kind == "gauge"


def test_the_otlp_form_is_cumulative_with_explicit_buckets() -> None:
    m = Metrics()
    m.invocations.add(("orders.get", "agent", "completed", ""), 2)
    m.stage_duration.observe(0.0002, ("resolve",))
    m.approvals_pending.set(3)
    data = metrics_data(m, Resource.create({"service.name": "t"}), start_ns=1)
    (rm,) = data.resource_metrics
    (scope,) = rm.scope_metrics
    by_name = {metric.name: metric for metric in scope.metrics}
    assert set(by_name) == {
        "capgate.invocations",
        "capgate.stage.duration",
        "capgate.approvals.pending",
    }  # empty instruments are not sent
    calls = by_name["capgate.invocations"].data
    assert isinstance(calls, Sum)
    assert calls.is_monotonic
    assert calls.aggregation_temporality is AggregationTemporality.CUMULATIVE
    (point,) = calls.data_points
    assert point.value == 2
    assert point.attributes == {
        "capability": "orders.get",
        "surface": "agent",
        "outcome": "completed",
        "code": "",
    }
    stage = by_name["capgate.stage.duration"].data
    assert isinstance(stage, Histogram)
    (hp,) = stage.data_points
    assert hp.count == 1
    assert len(hp.bucket_counts) == len(hp.explicit_bounds) + 1
    assert by_name["capgate.stage.duration"].unit == "s"
    assert isinstance(by_name["capgate.approvals.pending"].data, Gauge)


def _parent(sampled: bool) -> object:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    ctx = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=flags)
    return set_span_in_context(NonRecordingSpan(ctx))


@pytest.mark.parametrize("name", ["traceidratio", "always_off", "parentbased_always_off"])
def test_the_sampler_always_follows_a_sampled_caller(name: str) -> None:
    sampler = sampler_from_env({"OTEL_TRACES_SAMPLER": name, "OTEL_TRACES_SAMPLER_ARG": "0"})
    follow = sampler.should_sample(_parent(True), 0x1234, "x")  # type: ignore[arg-type]
    root = sampler.should_sample(None, 0x1234, "x")
    unsampled = sampler.should_sample(_parent(False), 0x1234, "x")  # type: ignore[arg-type]
    assert follow.decision is Decision.RECORD_AND_SAMPLE
    assert root.decision is Decision.DROP
    assert unsampled.decision is Decision.DROP


def test_an_unknown_sampler_name_falls_back_to_sampling_roots(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler = sampler_from_env({"OTEL_TRACES_SAMPLER": "jaeger_remote"})
    assert sampler.should_sample(None, 0x1234, "x").decision is Decision.RECORD_AND_SAMPLE
    assert "unsupported OTEL_TRACES_SAMPLER" in caplog.text


async def test_a_watched_gauge_is_polled_only_when_something_exports_it() -> None:
    gauge = GaugeInstrument("t.pending", "", "{approval}", ())
    reads = 0

    async def fetch() -> float:
        nonlocal reads
        reads += 1
        return float(reads)

    idle = Telemetry()
    idle.watch_gauge(gauge, fetch, interval_s=0.01)
    assert not idle.tasks
    exported = Telemetry(pusher=object())  # type: ignore[arg-type]
    exported.watch_gauge(gauge, fetch, interval_s=0.01)
    await asyncio.sleep(0.05)
    exported.pusher = None
    await exported.close()
    assert reads >= 2
    assert gauge.value() == reads


def test_without_an_exporter_no_tracer_is_installed() -> None:
    telemetry = start_telemetry(TelemetrySettings(tracing=True, otlp=False))
    assert telemetry.provider is None
    assert telemetry.traced() is None
    assert not enabled()
