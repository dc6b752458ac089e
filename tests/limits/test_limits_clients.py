"""The Python client exposes retry_after of a RATE_LIMITED envelope, through the real gateway."""

from __future__ import annotations

import pytest
from capgate_client import AsyncClient, ErrorCode, Failed

from tests.gateway.harness import Env, token

pytestmark = [pytest.mark.integration]


async def test_the_python_client_exposes_retry_after(env: Env) -> None:
    target = f"127.0.0.1:{env.port('agents')}"
    async with AsyncClient(target, token=token("alice"), timeout=10) as client:
        outcomes = [await client.invoke("orders.get", {"order_id": "o-1001"}) for _ in range(4)]
        listed = await client.invoke("orders.list", {"customer_id": "c-1"})
    refused = outcomes[-1]
    assert isinstance(refused, Failed), refused
    assert refused.error.code is ErrorCode.RATE_LIMITED
    assert refused.error.retryable
    assert refused.error.retry_after == pytest.approx(1.0, abs=0.002)
    assert not isinstance(listed, Failed) and not isinstance(outcomes[0], Failed)
