"""Inline approval (a synchronous `capgate.v1.Approver` upstream, fail closed) and redaction by
CEL expression (`redact.output_expr`), through the real server."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import yaml

from capgate.v1 import procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import ConfigError, load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration


class Approver(procedure_pb2_grpc.ApproverServicer):
    """Approves refunds under 1000 as bob (a manager); `mode` switches behaviours."""

    def __init__(self) -> None:
        self.mode = "normal"
        self.seen: list[procedure_pb2.ApproverDecideRequest] = []

    async def Decide(self, request: procedure_pb2.ApproverDecideRequest, context: Any) -> Any:
        self.seen.append(request)
        if self.mode == "slow":
            await asyncio.sleep(5)
        if self.mode == "error":
            await context.abort(grpc.StatusCode.INTERNAL, "approver broke")
        who = "alice" if self.mode == "self" else "bob"
        amount = orjson.loads(request.input_json)["amount"]
        return procedure_pb2.ApproverDecideResponse(
            approved=amount < 1000,
            approver=types_pb2.Actor(id=who, issuer="test-idp", kind="user", roles=["manager"]),
            note="auto",
        )


def _config(tmp: Path, approver_address: str) -> Path:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    data["upstreams"]["approver"] = {"address": approver_address, "kind": "grpc"}
    refund = next(c for c in data["capabilities"] if c["id"] == "orders.refund")
    inline = {**refund, "id": "payments.refund", "tags": ["payments"]}
    inline["approval"] = {
        "required": True,
        "inline_approver": "approver",
        "approvers": {"roles": ["manager"]},
    }
    summary = {
        "id": "orders.summary",
        "description": "A redacted view of an order.",
        "upstream": "orders",
        "method": "/orders.v1.Orders/GetOrder",
        "side_effect": "read",
        "risk": "low",
        "expose": {"agent": True},
        "redact": {"output_expr": '{"order_id": output.order_id, "items": size(output.items)}'},
    }
    data["capabilities"] += [inline, summary]
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
async def inline_env(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, Approver]]:
    approver = Approver()
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ApproverServicer_to_server(approver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        _config(tmp_path, f"127.0.0.1:{port}"),
        environ=gateway_environ(orders_upstream, redis_server.url, run_dir),
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(
        gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/capgate.sock"
    )
    yield env, approver
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)
    await server.stop(0)


def code(result: Any) -> str:
    return types_pb2.ErrorCode.Name(result.failed.code).removeprefix("ERROR_CODE_")


async def test_an_inline_approval_runs_the_call_in_one_request(
    inline_env: tuple[Env, Approver],
) -> None:
    env, approver = inline_env
    await env.reset_upstream()
    result = await env.invoke("payments.refund", {"order_id": "o-1003", "amount": 120})
    assert result.WhichOneof("outcome") == "completed", result
    assert result.approval_id  # the execution is linked to the inline approval
    assert await env.upstream_calls() == 1
    assert approver.seen[-1].approval.input_hash  # the approver saw the bound hash
    events = [e["event"] for e in await env.events_for(result.execution_id)]
    assert events == [
        "capability.requested",
        "capability.approval_requested",
        "capability.approved",
        "capability.started",
        "capability.completed",
    ]


@pytest.mark.parametrize(
    ("mode", "amount"), [("normal", 5000), ("error", 10), ("self", 10), ("slow", 10)]
)
async def test_inline_approval_fails_closed(
    inline_env: tuple[Env, Approver], mode: str, amount: int
) -> None:
    env, approver = inline_env
    approver.mode = mode
    await env.reset_upstream()
    result = await env.invoke(
        "payments.refund",
        {"order_id": "o-1003", "amount": amount},
        rpc_timeout=1.0 if mode == "slow" else 10,
    )
    # A refusal, an error, a self-approval and no answer within the deadline all reject.
    assert code(result) == "APPROVAL_REJECTED"
    assert await env.upstream_calls() == 0


async def test_output_expr_replaces_the_output(inline_env: tuple[Env, Approver]) -> None:
    env, _ = inline_env
    result = await env.invoke("orders.summary", {"order_id": "o-1001"})
    assert orjson.loads(result.completed.output_json) == {"order_id": "o-1001", "items": 2}


def test_an_output_expr_that_does_not_compile_is_a_config_error(tmp_path: Path) -> None:
    path = _config(tmp_path, "127.0.0.1:1")
    data = yaml.safe_load(path.read_text())
    data["capabilities"][-1]["redact"]["output_expr"] = "output.("
    path.write_text(yaml.safe_dump(data))
    env = gateway_environ("127.0.0.1:1", "redis://127.0.0.1:1", "/tmp")
    with pytest.raises(ConfigError) as err:
        load_settings(path, environ=env)
    assert "output_expr" in str(err.value)
