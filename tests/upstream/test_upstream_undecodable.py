"""Issue 25 item 4's class at the upstream call (stage 11): an upstream that answers bytes
that are not its response message. The upstream call asks grpc.aio for raw bytes and decodes
them itself (gateway/upstream/call.py), so grpc.aio's None never reaches the pipeline: the call
ends OUTPUT_INVALID (the upstream ran: executed before failure), for `kind: grpc` and
`kind: procedure` alike. The real gateway, real Redis and a loopback upstream answering raw
bytes (no serializer: they go out as they are)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, terminal_events

pytestmark = pytest.mark.integration

GARBAGE = b"\xff\xff\xff\xff"  # a varint tag that never ends: no message parses from it


async def _answer(_request: bytes, _context: Any) -> bytes:
    return GARBAGE


@pytest.fixture(scope="module")
async def garbled_upstream() -> AsyncIterator[str]:
    server = grpc.aio.server()
    raw = grpc.unary_unary_rpc_method_handler(_answer)  # no (de)serializers: raw bytes
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler("orders.v1.Orders", {"GetOrder": raw}),
            grpc.method_handlers_generic_handler("capgate.v1.Procedure", {"Invoke": raw}),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(0)


def _config(tmp: Path) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    data["capabilities"].append(
        {
            "id": "garbled.procedure",
            "description": "A procedure whose upstream answers garbage.",
            "upstream": "orders-procedure",
            "side_effect": "read",
            "risk": "low",
            "expose": {"agent": True},
            "input_schema": {"type": "object"},
        }
    )
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
async def garbled_env(
    garbled_upstream: str, redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        _config(tmp_path_factory.mktemp("garbled-upstream")),
        environ=gateway_environ(garbled_upstream, redis_server.url, run_dir),
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(
        gw=gw, audit=memory, orders_address=garbled_upstream, socket_path=f"{run_dir}/cg.sock"
    )
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


@pytest.mark.parametrize(
    ("capability", "value"),
    [("orders.get", {"order_id": "o-1001"}), ("garbled.procedure", {})],
)
async def test_an_undecodable_upstream_answer_is_output_invalid(
    garbled_env: Env, capability: str, value: dict[str, Any]
) -> None:
    result = await garbled_env.invoke(capability, value)
    assert result.WhichOneof("outcome") == "failed", result
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_OUTPUT_INVALID", result
    assert result.failed.executed_before_failure and not result.failed.retryable
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    (event,) = terminal_events(await garbled_env.events_for(result.execution_id))
    assert event["event"] == "capability.failed" and event["code"] == "OUTPUT_INVALID"
