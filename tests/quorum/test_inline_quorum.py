"""An inline approver is one approver: a requirement with a quorum above one is never met by its
answer (rejected, fail closed), through the real server with a real `capgate.v1.Approver`."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import yaml

from capgate.v1 import procedure_pb2, procedure_pb2_grpc, types_pb2
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent


class Approver(procedure_pb2_grpc.ApproverServicer):
    """Approves everything as bob, who holds every role asked."""

    async def Decide(self, request: procedure_pb2.ApproverDecideRequest, context: Any) -> Any:
        return procedure_pb2.ApproverDecideResponse(
            approved=True,
            approver=types_pb2.Actor(id="bob", issuer="test-idp", kind="user", roles=["approver"]),
        )


def _config(tmp: Path, approver_address: str, quorum: int) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    data["upstreams"]["approver"] = {"address": approver_address, "kind": "grpc"}
    board = next(c for c in data["capabilities"] if c["id"] == "pay.board")
    board["approval"] = {
        "required": True,
        "inline_approver": "approver",
        "approvers": {"roles": ["approver"]},
        "quorum": quorum,
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(params=[1, 2])
async def inline_env(
    request: pytest.FixtureRequest, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, int]]:
    orders, orders_port = await serve_orders("127.0.0.1:0")
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ApproverServicer_to_server(Approver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = {
        **gateway_environ(f"127.0.0.1:{orders_port}", redis_server.url, run_dir),
        "TEST_HOOK_URL": "http://127.0.0.1:9/hook",
        "TEST_HOOK_SECRET": "quorum-hook-secret-0123456789-abcdef",
    }
    settings = load_settings(_config(tmp_path, f"127.0.0.1:{port}", request.param), environ=environ)
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=f"127.0.0.1:{orders_port}", socket_path="")
    yield env, request.param
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
    await server.stop(0)
    await orders.stop(0)


async def test_an_inline_answer_never_makes_a_quorum(inline_env: tuple[Env, int]) -> None:
    env, quorum = inline_env
    result = await env.invoke("pay.board", {"order_id": "o-1003", "amount": 12.0})
    if quorum == 1:
        assert result.WhichOneof("outcome") == "completed", result
        assert orjson.loads(result.completed.output_json)
        return
    assert result.WhichOneof("outcome") == "failed", result
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_APPROVAL_REJECTED"
    assert await env.upstream_calls() == 0
