"""A shutdown ends long polls and watch streams cleanly (issue 14 follow-up G, ADR 0019),
through the real `capgate serve`, real Redis and the real upstream: with a WaitApproval
long-poll and a WatchApprovals stream open, SIGTERM must answer the WaitApproval with the
approval's current state and end the watch stream with status OK — never leave them for
grpc.aio to abort with UNAVAILABLE at the end of the grace period."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

import grpc
import orjson
import pytest
import yaml

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent


async def test_sigterm_answers_wait_approval_and_ends_watch_streams_ok(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies")]
    data["redis"]["key_prefix"] = "capgate-test-drain-polls"
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        # The long-poll and the stream wait longer than the grace: at its end grpc.aio would
        # abort them (UNAVAILABLE) unless the drain ended them first.
        *("--config", str(config), "--ready-file", str(ready), "--no-watch", "--grace", "3"),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        ports = await ready_ports(ready)
        agents = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
        admin = grpc.aio.insecure_channel(f"127.0.0.1:{ports['admin']}")
        gateway = gateway_pb2_grpc.CapabilityGatewayStub(agents)
        alice = [("authorization", f"Bearer {token('alice')}")]
        bob = [("authorization", f"Bearer {token('bob', audience='capgate-admin')}")]
        asked = await gateway.Invoke(
            gateway_pb2.InvokeRequest(
                capability_id="orders.refund",
                input_json=orjson.dumps({"order_id": "o-1001", "amount": 800}),
            ),
            metadata=alice,
            timeout=10,
        )
        assert asked.WhichOneof("outcome") == "approval_required", asked
        approval_id = asked.approval_required.approval.id

        request = gateway_pb2.WaitApprovalRequest(approval_id=approval_id)
        request.timeout.FromSeconds(50)
        waiting = asyncio.ensure_future(gateway.WaitApproval(request, metadata=alice, timeout=55))
        watch = admin_pb2_grpc.ApprovalAdminStub(admin).WatchApprovals(
            admin_pb2.WatchApprovalsRequest(), metadata=bob, timeout=55
        )
        # A second request's event shows the stream is live (its headers come with it).
        await asyncio.sleep(0.2)
        again = await gateway.Invoke(
            gateway_pb2.InvokeRequest(
                capability_id="orders.refund",
                input_json=orjson.dumps({"order_id": "o-1002", "amount": 900}),
            ),
            metadata=alice,
            timeout=10,
        )
        first = await watch.read()
        assert first.type == "requested"
        assert first.approval.id in (approval_id, again.approval_required.approval.id)
        assert not waiting.done()

        os.kill(proc.pid, signal.SIGTERM)
        answer = await waiting  # an answer: an aborted RPC would raise AioRpcError here
        assert not answer.HasField("error"), answer
        assert answer.approval.id == approval_id
        assert answer.approval.status == types_pb2.APPROVAL_STATUS_PENDING
        rest = []  # until the end of the stream; an abort would raise here
        while (event := await watch.read()) is not grpc.aio.EOF:
            rest.append(event)
        assert all(event.type == "requested" for event in rest)
        assert await watch.code() == grpc.StatusCode.OK
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        await agents.close()
        await admin.close()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
