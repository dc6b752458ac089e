"""Issue 14 item 12: an upstream reflection stream that ends with INTERNAL (what grpcio reports
at times for an upstream without reflection) still tells the operator to configure a
descriptor_set, at load and when the gateway starts."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import yaml

from gateway.config.loader import load_settings
from gateway.pipeline.snapshot import SnapshotError
from gateway.process.serve import start
from gateway.upstream.descriptors import load_from_reflection
from gateway.upstream.errors import UpstreamConfigError
from tests.gateway.conftest import HERE, gateway_environ

pytestmark = [pytest.mark.integration]


async def _internal(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    async for _ in requests:
        await context.abort(grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2")


@pytest.fixture
async def broken_reflection() -> AsyncIterator[str]:
    """A real gRPC server whose reflection stream always ends with INTERNAL."""
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "grpc.reflection.v1alpha.ServerReflection",
        {"ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(_internal)},
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


async def test_internal_from_reflection_gets_the_descriptor_set_hint(
    broken_reflection: str,
) -> None:
    async with grpc.aio.insecure_channel(broken_reflection) as channel:
        with pytest.raises(UpstreamConfigError, match=r"INTERNAL.*configure descriptor_set"):
            await load_from_reflection(channel, ["orders.v1.Orders"], timeout=5)


async def test_the_gateway_refuses_to_start_with_the_hint(
    broken_reflection: str, tmp_path: Any
) -> None:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    del data["upstreams"]["orders"]["descriptor_set"]  # reflection it is
    data["policies"]["paths"] = [str(HERE.parent.parent / "examples/policies")]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    environ = gateway_environ(broken_reflection, "redis://127.0.0.1:1/0", tempfile.mkdtemp())
    settings = load_settings(config, environ=environ)
    with pytest.raises(SnapshotError, match=r"INTERNAL.*configure descriptor_set") as caught:
        await start(settings)  # refused before Redis is needed or any port is bound
    assert "orders" in str(caught.value)
