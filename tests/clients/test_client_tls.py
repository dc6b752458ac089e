"""TLS end to end against a local grpc.aio CapabilityGateway with a CA made for the test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from capgate_client import AsyncClient, CapgateError, Catalog, Client, Tls
from clientkit import make_tls

from capgate.v1 import gateway_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.integration


class EchoGateway(gateway_pb2_grpc.CapabilityGatewayServicer):
    """Describe answers with the credentials the client sent."""

    async def Describe(self, request: Any, context: Any) -> Any:
        auth = dict(context.invocation_metadata()).get("authorization", "")
        descriptor = gateway_pb2.CapabilityDescriptor(id="echo", description=auth)
        return gateway_pb2.DescribeResponse(capabilities=[descriptor], revision="r1")


@pytest.fixture(scope="module")
async def tls_gateway() -> AsyncIterator[tuple[str, bytes]]:
    ca, cert, key = make_tls()
    server = grpc.aio.server()
    gateway_pb2_grpc.add_CapabilityGatewayServicer_to_server(EchoGateway(), server)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    await server.start()
    yield f"127.0.0.1:{port}", ca
    await server.stop(0)


async def test_a_client_trusting_the_ca_reaches_the_server_with_its_token(
    tls_gateway: tuple[str, bytes],
) -> None:
    target, ca = tls_gateway
    tls = Tls(root_certificates=ca, server_name="capgate.test")
    async with AsyncClient(target, token="tok", tls=tls, timeout=5) as client:
        catalog = await client.describe()
    assert catalog.revision == "r1"
    assert [(c.id, c.description) for c in catalog] == [("echo", "Bearer tok")]


async def test_a_client_that_does_not_trust_the_certificate_is_refused(
    tls_gateway: tuple[str, bytes],
) -> None:
    target, _ = tls_gateway
    async with AsyncClient(target, token="tok", tls=True, timeout=5) as client:
        with pytest.raises(CapgateError) as refused:
            await client.describe()
    assert refused.value.grpc_status is grpc.StatusCode.UNAVAILABLE


async def test_the_blocking_facade_speaks_tls_too(tls_gateway: tuple[str, bytes]) -> None:
    target, ca = tls_gateway

    def describe() -> Catalog:  # blocking: runs in a thread while this loop serves
        tls = Tls(root_certificates=ca, server_name="capgate.test")
        with Client(target, token="tok", tls=tls, timeout=5) as client:
            return client.describe()

    assert "echo" in await asyncio.to_thread(describe)
