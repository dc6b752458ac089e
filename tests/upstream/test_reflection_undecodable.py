"""Issue 25 item 4, the same class in server reflection: grpc.aio hands back None for a stream
message its deserializer cannot parse, so an upstream whose reflection answers bytes that are
not a ServerReflectionResponse is a load problem at the upstream (an UpstreamConfigError, the
gateway refuses to start and names it), never an AttributeError out of the loader."""

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

GARBAGE = b"\xff\xff\xff\xff"  # a varint tag that never ends: no message parses from it


async def _garbage(requests: AsyncIterator[bytes], _context: Any) -> AsyncIterator[bytes]:
    async for _ in requests:
        yield GARBAGE


@pytest.fixture
async def garbled_reflection() -> AsyncIterator[str]:
    """A real gRPC server whose reflection stream answers each request with raw bytes (no
    serializer: they go out as they are)."""
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "grpc.reflection.v1alpha.ServerReflection",
        {"ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(_garbage)},
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


@pytest.mark.parametrize("services", [None, ["orders.v1.Orders"]])
async def test_an_undecodable_reflection_answer_is_an_upstream_config_error(
    garbled_reflection: str, services: list[str] | None
) -> None:
    async with grpc.aio.insecure_channel(garbled_reflection) as channel:
        with pytest.raises(UpstreamConfigError, match="not a ServerReflectionResponse"):
            await load_from_reflection(channel, services, timeout=5)


async def test_the_gateway_refuses_to_start_naming_the_upstream(
    garbled_reflection: str, tmp_path: Any
) -> None:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    del data["upstreams"]["orders"]["descriptor_set"]  # reflection it is
    data["policies"]["paths"] = [str(HERE.parent.parent / "examples/policies")]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    environ = gateway_environ(garbled_reflection, "redis://127.0.0.1:1/0", tempfile.mkdtemp())
    settings = load_settings(config, environ=environ)
    with pytest.raises(SnapshotError, match="not a ServerReflectionResponse") as caught:
        await start(settings)  # refused before Redis is needed or any port is bound
    assert "upstream orders" in str(caught.value)
