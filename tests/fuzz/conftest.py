"""The fuzz suite runs against its own gateway (tests/gateway/gateway.yaml, in-process, real
listeners on loopback), the real example upstream and the session's real Redis."""

from tests.gateway.conftest import env, orders_upstream

__all__ = ["env", "orders_upstream"]
