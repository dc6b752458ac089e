"""Tracing and metrics (DESIGN §9): spans for the pipeline and cheap metric recording.

The request path imports only this package's light parts: `metrics` (in-process aggregation),
`root_span`/`child_span` (parent-based, no-op unless a sampled parent records) and
`traceparent` (the W3C header for the upstream). Exporters live in `gateway.process.telemetry`.
"""

from __future__ import annotations

from gateway.telemetry.instruments import Metrics, metrics
from gateway.telemetry.tracing import (
    child_span,
    current_traceparent,
    enabled,
    link_to,
    root_span,
    traceparent,
)

__all__ = [
    "Metrics",
    "child_span",
    "current_traceparent",
    "enabled",
    "link_to",
    "metrics",
    "root_span",
    "traceparent",
]
