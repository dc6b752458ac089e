"""The real gateway in front of the support desk MCP server (examples/mcp_upstream, written with
the official MCP Python SDK), both on loopback, with a real Redis."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.mcp_upstream.server import Running, serve
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token

HERE = Path(__file__).parent


@dataclass
class McpEnv:
    gw: Gateway
    desk: Running
    audit: MemorySink
    agents: grpc.aio.Channel
    admin: grpc.aio.Channel

    async def invoke(
        self, capability: str, value: Any, actor: str = "alice"
    ) -> gateway_pb2.ExecutionResult:
        request = gateway_pb2.InvokeRequest(
            capability_id=capability, input_json=orjson.dumps(value)
        )
        result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
            self.agents
        ).Invoke(request, metadata=[("authorization", f"Bearer {token(actor)}")], timeout=10)
        return result

    async def resume(self, approval_id: str, actor: str = "alice") -> gateway_pb2.ExecutionResult:
        result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
            self.agents
        ).Resume(
            gateway_pb2.ResumeRequest(approval_id=approval_id),
            metadata=[("authorization", f"Bearer {token(actor)}")],
            timeout=10,
        )
        return result

    async def approve(self, approval: types_pb2.Approval, by: str = "bob") -> None:
        answer = await admin_pb2_grpc.ApprovalAdminStub(self.admin).DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval.id,
                verdict=admin_pb2.VERDICT_APPROVE,
                note="ok",
                input_hash=approval.input_hash,
            ),
            metadata=[("authorization", f"Bearer {token(by, audience='capgate-admin')}")],
        )
        assert not answer.HasField("error"), answer


def environ(desk: Running, redis_url: str) -> dict[str, str]:
    run_dir = tempfile.mkdtemp(prefix="cg-mcpu-")
    return {
        **gateway_environ("127.0.0.1:1", redis_url, run_dir),
        "TEST_DESK_ADDR": desk.address,
        "TEST_DESK_TOKEN": "desk-static-credential",
    }


@pytest.fixture(scope="module")
async def mcp_env(redis_server: RedisProcess) -> AsyncIterator[McpEnv]:
    desk = await serve()
    audit = MemorySink()
    settings = load_settings(HERE / "gateway.yaml", environ=environ(desk, redis_server.url))
    gw = await start(settings, extra_sinks=[audit])
    agents = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    admin = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['admin']}")
    yield McpEnv(gw, desk, audit, agents, admin)
    await agents.close()
    await admin.close()
    await gw.stop(0.5)
    await desk.stop()


@pytest.fixture
async def env(mcp_env: McpEnv) -> McpEnv:
    mcp_env.desk.calls.clear()
    mcp_env.desk.headers.clear()
    return mcp_env
