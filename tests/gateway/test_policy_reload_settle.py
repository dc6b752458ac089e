"""Hot reload applies only settled content: a policy file written in place, in chunks with
pauses, never reaches requests half-written (issue 14 #10).

Through the real `capgate serve` process (its config watcher polling every 50 ms), real gRPC
calls, the real example upstream and real CEL. The file is rewritten in place (truncated, then
three chunks): empty (an empty set allows everything), then a prefix that parses as an
allow-only set, then a prefix that does not parse, then the whole new deny set. Every call made
meanwhile must be denied by the old set or the new one; the new one lands once the file settled.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent

PAUSE_S = 0.6  # between chunks: many polls see each partial state
SETTLE_S = 2.5  # the watcher's settle wait, well above PAUSE_S


def gate(version: str) -> str:
    return (
        "policies:\n"
        "  - name: a-open\n"
        "    match: {capabilities: [orders.get]}\n"
        "    rules: [{when: 'true', effect: allow}]\n"
        "  - name: z-gate\n"
        "    match: {capabilities: [orders.get]}\n"
        f"    rules: [{{when: 'true', effect: deny, message: closed-{version}}}]\n"
    )


async def test_a_policy_file_written_in_chunks_is_applied_only_once_settled(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    target = policies / "gate.yaml"
    target.write_text(gate("v1"))
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config)),
        *("--ready-file", str(ready), "--watch-interval", "0.05", "--grace", "1"),
        *("--watch-settle", str(SETTLE_S)),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        port = (await ready_ports(ready))["agents"]
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
        metadata = [("authorization", f"Bearer {token('alice')}")]
        answers: list[str] = []

        async def outcome() -> str:
            request = gateway_pb2.InvokeRequest(
                capability_id="orders.get", input_json=b'{"order_id": "o-1001"}'
            )
            result = await stub.Invoke(request, metadata=metadata, timeout=10)
            kind = result.WhichOneof("outcome")
            if kind == "failed" and result.failed.code == types_pb2.ERROR_CODE_POLICY_DENIED:
                return str(result.failed.message)
            return f"{kind}: {result}"

        assert await outcome() == "closed-v1"
        stop = asyncio.Event()

        async def keep_calling() -> None:
            while not stop.is_set():
                answers.append(await outcome())
                await asyncio.sleep(0.01)

        caller = asyncio.create_task(keep_calling())
        new = gate("v2")
        allow_only = new.index("  - name: z-gate")  # the file up to here parses: allow-only
        broken = new.index("effect: deny")  # up to here it does not parse
        with target.open("w") as handle:  # truncated in place: the file is empty now
            await asyncio.sleep(PAUSE_S)
            for chunk in (new[:allow_only], new[allow_only:broken], new[broken:]):
                handle.write(chunk)
                handle.flush()
                await asyncio.sleep(PAUSE_S)
        deadline = time.monotonic() + 30
        while not answers or answers[-1] != "closed-v2":
            assert time.monotonic() < deadline, f"the new set never landed: {answers[-3:]}"
            await asyncio.sleep(0.05)
        stop.set()
        await caller
        wrong = [a for a in answers if a not in ("closed-v1", "closed-v2")]
        assert not wrong, wrong[:3]
        assert len(answers) > 20  # calls were made throughout the write
        v2 = answers.index("closed-v2")
        assert all(a == "closed-v2" for a in answers[v2:])  # never back to a partial or old set
        await channel.close()
        os.kill(proc.pid, signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
