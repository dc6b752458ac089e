"""Fixtures of the audit tests: the example upstream (session) and the audited gateway
(`tests.audit.kit.audited`, one per module)."""

from __future__ import annotations

from tests.audit.kit import audited
from tests.gateway.conftest import orders_upstream

__all__ = ["audited", "orders_upstream"]
