"""Limits on the other surfaces: the MCP result carries the retry time, two `capgate serve`
processes share one limit through Redis, and `capgate config check` reports limit problems at
file:line:column (docs/limits.md)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env, ready_ports, token
from tests.mcp.mcpkit import McpEnv, request, session_headers

pytestmark = [pytest.mark.integration]

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
GET = {"order_id": "o-1001"}


async def test_the_mcp_result_of_a_refused_call_carries_the_retry_time(env: Env) -> None:
    mcp = McpEnv(gw=env.gw, audit=env.audit, orders_address=env.orders_address)
    async with mcp.http() as http:
        session = await mcp.initialize(http)
        results = []
        for n in range(4):  # get_rate: a burst of 3 per actor
            call = request(n + 2, "tools/call", {"name": "orders_get", "arguments": GET})
            reply = await http.post("/mcp", json=call, headers=session_headers(session))
            assert reply.status_code == 200, reply.text
            results.append(reply.json()["result"])
    assert [r["isError"] for r in results] == [False, False, False, True]
    refused = results[-1]
    content = refused["structuredContent"]
    assert content["code"] == "RATE_LIMITED"
    assert content["retryable"] is True
    assert content["execution_state"] == "NOT_STARTED"
    assert content["retry_after_s"] == pytest.approx(1.0, abs=0.002)
    assert "Retry after 1s." in refused["content"][0]["text"]
    assert await env.upstream_calls("GetOrder") == 3


@pytest.fixture
async def two_gateways(
    orders: str, limits_redis: RedisProcess, limits_env: Env
) -> AsyncIterator[tuple[int, int]]:
    """Two `capgate serve` processes on the limits config and one Redis; their gRPC ports."""
    run = Path(tempfile.mkdtemp(prefix="cgl-"))
    environ = gateway_environ(orders, limits_redis.url, str(run))
    procs: list[subprocess.Popen[bytes]] = []
    ports: list[int] = []
    try:
        for n in range(2):
            ready = run / f"ready-{n}.json"
            argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config"]
            argv += [str(HERE / "gateway.yaml"), "--ready-file", str(ready), "--no-watch"]
            with open(run / f"serve-{n}.log", "ab") as log:  # noqa: ASYNC230 - at setup
                procs.append(
                    subprocess.Popen(  # noqa: ASYNC220 - started once, reaped off-loop
                        argv, cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT
                    )
                )
            ports.append((await ready_ports(ready, timeout_s=60))["agents"])
        yield ports[0], ports[1]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


async def test_two_gateway_processes_share_one_limit(
    env: Env, two_gateways: tuple[int, int]
) -> None:
    """The refund budget (1000 per actor per 24 h) is spent alternately through two processes:
    the third call is refused by whichever process gets it. Real clocks: the window is long."""
    metadata = [("authorization", f"Bearer {token('carol')}")]
    outcomes = []
    for n, port in enumerate([*two_gateways, two_gateways[0], two_gateways[1]]):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            body = orjson.dumps({"order_id": "o-1001", "amount": 400, "reason": f"r{n}"})
            result = await stub.Invoke(
                gateway_pb2.InvokeRequest(capability_id="orders.refund", input_json=body),
                metadata=metadata,
                timeout=10,
            )
        kind = result.WhichOneof("outcome")
        outcomes.append(
            kind if kind == "completed" else types_pb2.ErrorCode.Name(result.failed.code)
        )
    assert outcomes == [
        "completed",
        "completed",
        "ERROR_CODE_RATE_LIMITED",
        "ERROR_CODE_RATE_LIMITED",
    ]
    assert await env.upstream_calls("RefundOrder") == 2


BROKEN_POLICY = """policies:
  - name: reads-a-limit-that-does-not-exist
    phases: [execution]
    rules:
      - when: limits.nope.remaining < 1.0
        effect: deny
"""


def _check(tmp_path: Path, text: str) -> str:
    """`capgate config check` on `text` (the limits config, edited); its stdout."""
    config = tmp_path / "gateway.yaml"
    config.write_text(text)
    (tmp_path / "broken.yaml").write_text(BROKEN_POLICY)
    environ = gateway_environ("127.0.0.1:1", "redis://127.0.0.1:1/0", str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", "config", "check", str(config)],
        cwd=ROOT,
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def _at(text: str, fragment: str) -> tuple[int, int]:
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if fragment in t)
    return line, lines[line - 1].index(fragment) + 1


def _config() -> str:
    text = (HERE / "gateway.yaml").read_text()
    return text.replace("../../examples/orders/orders.pb", str(ROOT / "examples/orders/orders.pb"))


def test_config_check_reports_limit_rules_at_file_line(tmp_path: Path) -> None:
    text = _config().replace(
        "rate: {limit: 100, window: 1s}", "rate: {limit: 100, window: 1s, burst: 200}"
    )
    text = text.replace("  - name: approved_budget\n", "  - name: get_rate\n")
    out = _check(tmp_path, text)
    config = tmp_path / "gateway.yaml"
    line, _ = _at(text, "burst: 200")
    assert f"{config}:{line}: limits[2].rate.burst: must be at most rate.limit" in out, out
    assert "limits[3].name: duplicate limit name (first at limits[0])" in out, out


def test_config_check_reports_limit_expressions_at_file_line_column(tmp_path: Path) -> None:
    text = _config().replace(
        "    key: actor.id\n    rate: {limit: 3,", "    key: actor.idd\n    rate: {limit: 3,"
    )
    text = text.replace(
        "budget: {amount: input.amount, max: 100,", "budget: {amount: input.order_id, max: 100,"
    )
    text = text.replace(
        "    tags: [billing]\n    key: actor.id\n", "    tags: [billing]\n    key: input.amount\n"
    )
    text = text.replace("paths: [policies.yaml]", "paths: [broken.yaml]")
    out = _check(tmp_path, text)
    config = tmp_path / "gateway.yaml"
    line, column = _at(text, "actor.idd")  # cel-cpp points at the select: the dot
    assert (
        f"{config}:{line}:{column + 5}: limits[0] (get_rate).key: actor has no field 'idd'" in out
    ), out
    line, column = _at(text, "input.order_id")
    assert (
        f"{config}:{line}:{column}: limits[3] (approved_budget).budget.amount: amount must be "
        "int or uint or double, but it is STRING"
    ) in out, out
    line, _ = _at(text, "key: input.amount")
    assert f"{config}:{line}:" in out and "a limit's key cannot read `input`" in out, out
    # A policy reading a limit no config defines: typed at load, in the policy file.
    assert f"{tmp_path / 'broken.yaml'}:5:" in out and "nope" in out, out
