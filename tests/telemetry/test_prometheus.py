"""The Prometheus endpoint (`telemetry.prometheus_address`), scraped over HTTP from the running
gateway: invocation counts by capability/outcome/code, latency histograms per stage, policy and
upstream latency, audit delivery — and no unbounded label values."""

from __future__ import annotations

import re
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.audit.kit import Stack

pytestmark = pytest.mark.integration

_ID = re.compile(r"[0-9a-f]{32}")


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(text: str, name: str, *, default: float | None = None, **labels: str) -> float:
    found = [s.value for s in samples(text) if s.name == name and s.labels == labels]
    if not found and default is not None:
        return default
    assert len(found) == 1, (name, labels, [s for s in samples(text) if s.name == name])
    return found[0]


async def test_invocations_are_counted_by_capability_surface_outcome_and_code(
    audited: Stack,
) -> None:
    labels = {"capability": "orders.get", "surface": "agent", "outcome": "completed", "code": ""}
    before = await audited.scrape()
    start = value(before, "capgate_invocations_total", default=0.0, **labels)  # per process
    for _ in range(3):
        await audited.env.invoke("orders.get", {"order_id": "o-1001"})
    denied = await audited.env.invoke("orders.refund", {"order_id": "o-1001", "amount": 20000})
    assert denied.WhichOneof("outcome") == "failed"
    text = await audited.scrape()
    assert value(text, "capgate_invocations_total", **labels) == start + 3
    assert (
        value(
            text,
            "capgate_invocations_total",
            capability="orders.refund",
            surface="agent",
            outcome="failed",
            code="POLICY_DENIED",
        )
        >= 1
    )


async def test_stage_latency_histograms_are_consistent(audited: Stack) -> None:
    await audited.env.invoke("orders.get", {"order_id": "o-1001"})
    text = await audited.scrape()
    stage = "procedure-invocation"
    count = value(text, "capgate_stage_duration_seconds_count", stage=stage)
    assert count >= 1
    assert value(text, "capgate_stage_duration_seconds_bucket", stage=stage, le="+Inf") == count
    buckets = [
        s
        for s in samples(text)
        if s.name == "capgate_stage_duration_seconds_bucket" and s.labels["stage"] == stage
    ]
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)  # cumulative
    assert value(text, "capgate_stage_duration_seconds_sum", stage=stage) > 0
    stages = {
        s.labels["stage"] for s in samples(text) if s.name == "capgate_stage_duration_seconds_count"
    }
    assert {
        "resolve",
        "exposure",
        "input-validation",
        "invocation-policies",
        "controls",
        "redaction",
    } <= stages


async def test_policy_upstream_and_audit_metrics_are_exported(audited: Stack) -> None:
    await audited.env.invoke("orders.get", {"order_id": "o-1001"})
    await audited.env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    text = await audited.scrape()
    assert value(text, "capgate_policy_evaluation_duration_seconds_count", phase="invocation") >= 1
    assert value(text, "capgate_upstream_duration_seconds_count", upstream="orders", code="OK") >= 1
    assert value(text, "capgate_audit_written_total", sink="redis") >= 1
    pending = [
        f for f in text_string_to_metric_families(text) if f.name == "capgate_approvals_pending"
    ]
    assert pending
    assert pending[0].type == "gauge"


async def test_caller_chosen_ids_never_become_label_values(audited: Stack) -> None:
    probe = f"probe-{uuid.uuid4().hex}"
    result = await audited.env.invoke(probe, {}, correlation_id=uuid.uuid4().hex)
    assert result.WhichOneof("outcome") == "failed"
    text = await audited.scrape()
    assert probe not in text
    assert result.execution_id not in text
    assert (
        value(
            text,
            "capgate_invocations_total",
            capability="(unknown)",
            surface="agent",
            outcome="failed",
            code="CAPABILITY_NOT_FOUND",
        )
        >= 1
    )
    for sample in samples(text):
        for label in sample.labels.values():
            assert not _ID.search(label), sample
