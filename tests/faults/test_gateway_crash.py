"""The real `capgate serve` process SIGKILLed (and Redis with it) in the middle of the approval
and idempotency flows, then started again on the same AOF data; and SIGTERM (drain) with a
resumed and a keyed call in flight. Nothing executes twice, nothing is lost silently."""

from __future__ import annotations

import asyncio
import signal

import grpc
import pytest

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from tests.faults.kit import CAPABILITY, GATED, Stack, body, code, state
from tests.gateway.harness import token

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]


class Client:
    """The caller and the approver, over the listeners a `capgate serve` reported."""

    def __init__(self, ports: dict[str, int]) -> None:
        self.agents = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
        self.admin_channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports['admin']}")
        self.gw = gateway_pb2_grpc.CapabilityGatewayStub(self.agents)
        self.admin = admin_pb2_grpc.ApprovalAdminStub(self.admin_channel)

    async def invoke(
        self, order_id: str, key: str = "", capability: str = CAPABILITY
    ) -> gateway_pb2.ExecutionResult:
        request = gateway_pb2.InvokeRequest(
            capability_id=capability, input_json=body(order_id), idempotency_key=key
        )
        md = [("authorization", f"Bearer {token('alice')}")]
        return await self.gw.Invoke(request, metadata=md, timeout=30)

    async def resume(self, approval_id: str) -> gateway_pb2.ExecutionResult:
        md = [("authorization", f"Bearer {token('alice')}")]
        return await self.gw.Resume(
            gateway_pb2.ResumeRequest(approval_id=approval_id), metadata=md, timeout=30
        )

    async def approved(self, order_id: str) -> types_pb2.Approval:
        asked = await self.invoke(order_id, capability=GATED)
        assert asked.WhichOneof("outcome") == "approval_required", asked
        approval = asked.approval_required.approval
        reply = await self.admin.DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval.id,
                verdict=admin_pb2.VERDICT_APPROVE,
                note="fault suite",
                input_hash=approval.input_hash,
            ),
            metadata=[("authorization", f"Bearer {token('bob', audience='capgate-admin')}")],
            timeout=10,
        )
        assert not reply.HasField("error"), reply
        return approval

    async def close(self) -> None:
        await self.agents.close()
        await self.admin_channel.close()


async def _restart(stack: Stack, *, with_redis: bool) -> Client:
    assert stack.serve is not None
    stack.serve.kill()  # SIGKILL
    stack.serve.wait(10)
    if with_redis:
        stack.redis.kill()
        stack.redis.start()  # same port, same data directory: the AOF is replayed
    return Client(await stack.start_serve())


async def test_sigkill_during_a_resumed_call_never_reruns_it(stack: Stack) -> None:
    client = Client(await stack.start_serve())
    try:
        approval = await client.approved("slow-3000")
        inflight = asyncio.ensure_future(client.resume(approval.id))
        await stack.upstream.wait_calls(1)  # consumed; the call is inside the upstream
        client2 = await _restart(stack, with_redis=True)
        with pytest.raises(grpc.aio.AioRpcError):
            await inflight  # the caller saw the gateway die
        assert await stack.approval_status(approval.id) == "consumed"
        after = await client2.resume(approval.id)
        assert code(after) == "APPROVAL_CONSUMED" and state(after) == "UNKNOWN"
        await asyncio.sleep(3.5)  # the first call has finished inside the upstream by now
        assert await stack.upstream.calls() == 1  # never a second run
        await client2.close()
    finally:
        await client.close()


async def test_sigkill_after_the_decision_keeps_the_approval_and_runs_it_once(
    stack: Stack,
) -> None:
    client = Client(await stack.start_serve())
    try:
        approval = await client.approved("slow-1")
        client2 = await _restart(stack, with_redis=True)
        assert await stack.approval_status(approval.id) == "approved"
        done = await client2.resume(approval.id)
        assert code(done) == "completed" and state(done) == "COMPLETED"
        assert await client2.resume(approval.id) == done
        assert await stack.upstream.calls() == 1
        await client2.close()
    finally:
        await client.close()


async def test_sigkill_during_a_keyed_call_never_reruns_the_key(stack: Stack) -> None:
    client = Client(await stack.start_serve())
    try:
        inflight = asyncio.ensure_future(client.invoke("slow-3000", key="k-crash"))
        await stack.upstream.wait_calls(1)
        client2 = await _restart(stack, with_redis=True)
        with pytest.raises(grpc.aio.AioRpcError):
            await inflight
        again = await client2.invoke("slow-3000", key="k-crash")
        # The claim is still running: in progress (or, after its lease, outcome unknown).
        assert code(again) in {"IDEMPOTENCY_IN_PROGRESS", "EXECUTION_FAILED", "CANCELLED"}, again
        assert code(again) == "IDEMPOTENCY_IN_PROGRESS" or state(again) == "UNKNOWN"
        await asyncio.sleep(3.5)
        assert await stack.upstream.calls() == 1
        await client2.close()
    finally:
        await client.close()


async def test_sigterm_drains_a_resumed_and_a_keyed_call_in_flight(stack: Stack) -> None:
    client = Client(await stack.start_serve(grace_s=10))
    try:
        approval = await client.approved("slow-1200")
        resumed = asyncio.ensure_future(client.resume(approval.id))
        keyed = asyncio.ensure_future(client.invoke("slow-1201", key="k-drain"))
        await stack.upstream.wait_calls(2)
        assert stack.serve is not None
        stack.serve.send_signal(signal.SIGTERM)
        done, keyed_done = await asyncio.gather(resumed, keyed)
        assert code(done) == "completed" and code(keyed_done) == "completed"
        assert await asyncio.to_thread(stack.serve.wait, 20) == 0
        assert await stack.approval_status(approval.id) == "executed"
        client2 = Client(await stack.start_serve())
        assert await client2.resume(approval.id) == done  # recorded before the exit
        assert await client2.invoke("slow-1201", key="k-drain") == keyed_done
        assert await stack.upstream.calls() == 2
        await client2.close()
    finally:
        await client.close()
