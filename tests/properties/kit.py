"""The state machine's system under test: one real Redis (AOF), the example orders upstream in
a child process (tests/faults/kit.py's `Upstream`), and TWO `capgate serve` child processes
sharing both, each writing its audit trail to its own JSON-lines file (the `file` sink).

Every call carries a correlation id the test chooses; the upstream's log (orders.v1.Control)
records it with the execution id, the forwarded idempotency key and approval id of every call
that reached it, so each upstream call is traced back to the request that caused it.

The config (`config_text`) has three write capabilities on the RefundOrder method, each
expecting `{order_id, amount}`: `prop.refund` under a budget `{amount: input.amount, max,
on_exceed: require-approval}`, `prop.gated` behind a require-approval policy (a manager
decides), and `prop.plain` (neither; a reload can make it need approval). The order ids are
the upstream's `slow-<ms>` fault ids: they answer after <ms> and never change the book.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson
import redis.asyncio as aioredis
import yaml

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.orders import orders_pb2, orders_pb2_grpc
from gateway.state.embedded import RedisProcess
from gateway.state.idempotency import IdempotencyScope
from tests.faults.kit import Upstream
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import ready_ports, token
from tests.properties.redisproxy import RedisRelay

ROOT = Path(__file__).resolve().parent.parent.parent
PREFIX = "capgate-prop"
ISSUER = "test-idp"
SURFACE = "agent"
REFUND = "/orders.v1.Orders/RefundOrder"
BUDGETED, GATED, PLAIN = "prop.refund", "prop.gated", "prop.plain"
CAPABILITIES = (BUDGETED, GATED, PLAIN)
BUDGET = "refund_budget"
APPROVER = "bob"  # manager and approver in tests/gateway/harness.py's test IdP
GATED_POLICY = """\
policies:
  - name: gated-refunds-need-a-manager
    description: The state machine's approval-gated write.
    match:
      capabilities: [prop.gated]
    rules:
      - when: "true"
        effect: require-approval
        message: A manager must approve this refund.
        approval:
          reason: state machine
          approvers: {roles: [manager]}
"""
# How long a Redis fault withholds replies: past the gateway's 2 s command timeout
# (gateway/state/connections.py), so a command sent during it runs and its reply is lost.
LOST_REPLY_HOLD_S = 2.3


@dataclass(frozen=True)
class Variant:
    """What a reload can change: the budget's max, and whether prop.plain needs approval."""

    budget_max: int = 8
    plain_gated: bool = False


def _capability(capability_id: str, description: str) -> dict[str, Any]:
    return {
        "id": capability_id,
        "description": description,
        "upstream": "orders",
        "method": REFUND,
        "side_effect": "write",  # one attempt: each attempt is one upstream call
        "risk": "high",
        "expose": {"agent": True},
        "timeout": "10s",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["order_id", "amount"],
            "properties": {
                "order_id": {"type": "string", "minLength": 1, "maxLength": 64},
                "amount": {"type": "number"},
            },
        },
    }


def _jwt_listener(name: str, surface: str, audience: str) -> dict[str, Any]:
    listener: dict[str, Any] = {
        "name": name,
        "address": "127.0.0.1:0",
        "surface": surface,
        "auth": "jwt",
        "jwt": {
            "issuers": [ISSUER],
            "audience": audience,
            "keys": [{"kid": "hs1", "alg": "HS256", "secret": "{{ env.TEST_JWT_SECRET }}"}],
        },
    }
    if surface == "admin":
        listener["role"] = "admin"
    return listener


def config_text(variant: Variant, policies: Path) -> str:
    plain = _capability(PLAIN, "A keyed write with neither budget nor approval.")
    if variant.plain_gated:
        plain["approval"] = {"required": True, "reason": "reloaded: plain refunds need approval"}
    data = {
        "version": 1,
        "listeners": [
            _jwt_listener("agents", "agent", "capgate"),
            _jwt_listener("admin", "admin", "capgate-admin"),
        ],
        "upstreams": {
            "orders": {
                "address": "{{ env.TEST_ORDERS_ADDR }}",
                "kind": "grpc",
                "descriptor_set": str(ROOT / "examples/orders/orders.pb"),
            }
        },
        "capabilities": [
            {**_capability(BUDGETED, "A refund within a budget."), "tags": ["budgeted"]},
            _capability(GATED, "A refund a manager approves."),
            plain,
        ],
        "limits": [
            {
                "name": BUDGET,
                "tags": ["budgeted"],
                "key": "actor.id",
                "budget": {
                    "amount": "input.amount",
                    "max": variant.budget_max,
                    "window": "24h",
                    "on_exceed": "require-approval",
                },
            }
        ],
        "policies": {"paths": [str(policies)]},
        "approvals": {"default_expires_in": "15m"},
        "idempotency": {"ttl": "1h"},
        "audit": {
            "sinks": ["file"],
            "file": "{{ env.PROP_AUDIT_FILE }}",
            "hmac_key": "{{ env.TEST_HMAC_KEY }}",
        },
        "defaults": {"timeout": "10s"},
        "redis": {"url": "{{ env.TEST_REDIS_URL }}", "key_prefix": PREFIX},
    }
    return yaml.safe_dump(data, sort_keys=False)


def outcome(result: gateway_pb2.ExecutionResult) -> str:
    """`completed`, `approval_required`, or the error code of a failure or cancellation."""
    kind = result.WhichOneof("outcome")
    if kind in ("failed", "cancelled"):
        err = getattr(result, kind)
        return types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")
    return str(kind)


def state_name(result: gateway_pb2.ExecutionResult) -> str:
    return types_pb2.ExecutionState.Name(result.execution_state).removeprefix("EXECUTION_STATE_")


@dataclass
class GatewayProcess:
    """One `capgate serve` child process, its listener ports and its audit file."""

    name: str
    run_dir: Path
    audit_path: Path
    popen: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)
    audit_offset: int = 0

    def channel(self, listener: str) -> grpc.aio.Channel:
        if listener not in self.channels:
            target = f"127.0.0.1:{self.ports[listener]}"
            self.channels[listener] = grpc.aio.insecure_channel(target)
        return self.channels[listener]

    def gateway(self) -> gateway_pb2_grpc.CapabilityGatewayStub:
        return gateway_pb2_grpc.CapabilityGatewayStub(self.channel("agents"))

    def admin(self) -> admin_pb2_grpc.ApprovalAdminStub:
        return admin_pb2_grpc.ApprovalAdminStub(self.channel("admin"))

    def new_audit_events(self) -> list[dict[str, Any]]:
        """The complete lines appended to the audit file since the last read."""
        if not self.audit_path.exists():
            return []
        with self.audit_path.open("rb") as handle:
            handle.seek(self.audit_offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1  # a batch being written: only whole lines
        self.audit_offset += end
        return [orjson.loads(line) for line in chunk[:end].splitlines() if line]


@dataclass
class Stack:
    work: Path
    redis: RedisProcess
    relay: RedisRelay  # the gateways' way to Redis; the test reads Redis directly
    upstream: Upstream
    config: Path
    policies: Path
    gateways: dict[str, GatewayProcess] = field(default_factory=dict)
    variant: Variant = Variant()
    _redis_client: aioredis.Redis | None = None

    @classmethod
    def create(cls, tmp_path: Path) -> Stack:
        work = Path(tempfile.mkdtemp(prefix="cgp-"))
        redis = RedisProcess(tmp_path / "redis").start()
        relay = RedisRelay(redis.port).start()
        upstream = Upstream(work).start()
        policies = tmp_path / "policies"
        policies.mkdir()
        (policies / "gated.yaml").write_text(GATED_POLICY)
        config = tmp_path / "gateway.yaml"
        config.write_text(config_text(Variant(), policies))
        return cls(work, redis, relay, upstream, config, policies)

    def environ(self, gateway: GatewayProcess) -> dict[str, str]:
        environ = gateway_environ(self.upstream.address, self.relay.url, str(gateway.run_dir))
        return {**environ, "PROP_AUDIT_FILE": str(gateway.audit_path)}

    def spawn(self, name: str) -> tuple[GatewayProcess, Path]:
        """Start one `capgate serve`; returns it and the ready file it will write."""
        run_dir = self.work / name
        run_dir.mkdir()
        gateway = GatewayProcess(name, run_dir, run_dir / "audit.jsonl")
        ready = run_dir / "ready.json"
        argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(self.config)]
        argv += ["--ready-file", str(ready), "--grace", "2", "--log-level", "WARNING"]
        argv += ["--watch-interval", "0.1", "--watch-settle", "0.1", "--workers", "1"]
        with open(run_dir / "serve.log", "ab") as out:
            gateway.popen = subprocess.Popen(
                argv, cwd=ROOT, env=self.environ(gateway), stdout=out, stderr=out
            )
        self.gateways[name] = gateway
        return gateway, ready

    async def start(self, names: tuple[str, ...] = ("A", "B")) -> None:
        """Both gateways, started together (each takes seconds to import and load)."""
        readies = [self.spawn(name) for name in names]
        for gateway, ready in readies:
            deadline = time.monotonic() + 60
            while not ready.exists():
                assert gateway.popen is not None
                if gateway.popen.poll() is not None or time.monotonic() > deadline:
                    log = (gateway.run_dir / "serve.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"gateway {gateway.name} did not start:\n{log}")
                await asyncio.sleep(0.05)
            gateway.ports = await ready_ports(ready, timeout_s=5)

    # --- calls -------------------------------------------------------------------------------

    @staticmethod
    def caller(actor: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {token('alice', sub=actor)}")]

    async def invoke(
        self,
        gateway: str,
        actor: str,
        capability: str,
        value: dict[str, Any],
        *,
        key: str,
        correlation: str,
        timeout_s: float = 15.0,
    ) -> gateway_pb2.ExecutionResult:
        request = gateway_pb2.InvokeRequest(
            capability_id=capability,
            input_json=orjson.dumps(value),
            idempotency_key=key,
            correlation_id=correlation,
        )
        stub = self.gateways[gateway].gateway()
        return await stub.Invoke(request, metadata=self.caller(actor), timeout=timeout_s)

    async def resume(
        self, gateway: str, actor: str, approval_id: str, *, correlation: str, timeout_s: float = 15
    ) -> gateway_pb2.ExecutionResult:
        request = gateway_pb2.ResumeRequest(approval_id=approval_id, correlation_id=correlation)
        stub = self.gateways[gateway].gateway()
        return await stub.Resume(request, metadata=self.caller(actor), timeout=timeout_s)

    async def decide(
        self, gateway: str, approval: types_pb2.Approval, *, approve: bool
    ) -> admin_pb2.DecideApprovalResponse:
        verdict = admin_pb2.VERDICT_APPROVE if approve else admin_pb2.VERDICT_REJECT
        request = admin_pb2.DecideApprovalRequest(
            approval_id=approval.id,
            verdict=verdict,
            note="state machine",
            input_hash=approval.input_hash,
        )
        metadata = [("authorization", f"Bearer {token(APPROVER, audience='capgate-admin')}")]
        reply: admin_pb2.DecideApprovalResponse = (
            await self.gateways[gateway]
            .admin()
            .DecideApproval(request, metadata=metadata, timeout=10)
        )
        return reply

    async def approvals_of(self, actor: str) -> dict[str, tuple[str, str]]:
        """Every approval record the actor requested, any status: id → (status name, the
        execution id that requested it)."""
        metadata = [("authorization", f"Bearer {token(APPROVER, audience='capgate-admin')}")]
        statuses = [s for s in types_pb2.ApprovalStatus.values() if s]
        found: dict[str, tuple[str, str]] = {}
        admin, page = self.gateways["A"].admin(), ""
        while True:
            request = admin_pb2.ListApprovalsRequest(
                statuses=statuses, requester_id=actor, page_size=100, page_token=page
            )
            reply = await admin.ListApprovals(request, metadata=metadata, timeout=10)
            assert not reply.HasField("error"), f"ListApprovals failed: {reply.error}"
            for approval in reply.approvals:
                name = types_pb2.ApprovalStatus.Name(approval.status)
                status = name.removeprefix("APPROVAL_STATUS_")
                found[approval.id] = (status, approval.requesting_execution_id)
            if not reply.next_page_token:
                return found
            page = reply.next_page_token

    # --- what the upstream saw ---------------------------------------------------------------

    async def upstream_log(self) -> list[orders_pb2.CallRecord]:
        async with grpc.aio.insecure_channel(self.upstream.address) as channel:
            stats = await orders_pb2_grpc.ControlStub(channel).GetStats(
                orders_pb2.GetStatsRequest(), timeout=5
            )
        return [r for r in stats.log if r.method == REFUND]

    async def reset_upstream(self) -> None:
        async with grpc.aio.insecure_channel(self.upstream.address) as channel:
            await orders_pb2_grpc.ControlStub(channel).Reset(orders_pb2.ResetRequest(), timeout=5)

    async def until_upstream_saw(self, correlation: str, timeout_s: float = 5.0) -> bool:
        """Until a call with this correlation id is inside the upstream (False: it never came)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(r.correlation_id == correlation for r in await self.upstream_log()):
                return True
            await asyncio.sleep(0.005)
        return False

    # --- what Redis holds (key layouts: gateway/state/limits/store.py,
    # gateway/state/idempotency.py) ------

    async def client(self) -> aioredis.Redis:
        if self._redis_client is None:
            self._redis_client = aioredis.Redis.from_url(self.redis.url, socket_timeout=10)
        return self._redis_client

    async def budget_spent(self, actor: str) -> float:
        """The budget's spent amount for `actor` (0 when nothing was spent or kept)."""
        client = await self.client()
        digest = hashlib.sha256(actor.encode()).hexdigest()[:32]
        total = 0.0
        async for key in client.scan_iter(match=f"{PREFIX}:{{lim}}:{BUDGET}:*:{digest}"):
            total += float(await client.hget(key, "spent") or 0)
        return total

    async def journal_state(self, actor: str, capability: str, key: str) -> str | None:
        """The idempotency entry's state (`running`, `done`) or None when there is none."""
        scope = IdempotencyScope(ISSUER, actor, SURFACE, capability, key)
        state = await (await self.client()).hget(f"{PREFIX}:{{idem:{scope.digest()}}}", "state")
        return state.decode() if state is not None else None

    async def restart_redis(self) -> None:
        """Stop Redis (SIGTERM) and start it again on the same port and AOF data."""
        if self._redis_client is not None:
            await self._redis_client.aclose()
            self._redis_client = None
        self.redis.stop()
        self.redis.start()

    # --- reload -------------------------------------------------------------------------------

    async def revisions(self) -> dict[str, str]:
        metadata = self.caller("prop-reload-probe")
        out = {}
        for name, gateway in self.gateways.items():
            reply = await gateway.gateway().Describe(
                gateway_pb2.DescribeRequest(), metadata=metadata, timeout=5
            )
            out[name] = reply.revision
        return out

    async def reload(self, variant: Variant, timeout_s: float = 20.0) -> None:
        """Publish the config with a rename (docs/config.md) and wait until both gateways
        serve a new revision."""
        if variant == self.variant:
            return
        before = await self.revisions()
        staged = self.config.with_suffix(".tmp")
        staged.write_text(config_text(variant, self.policies))
        os.replace(staged, self.config)
        self.variant = variant
        deadline = time.monotonic() + timeout_s
        while True:
            now = await self.revisions()
            if all(now[n] != before[n] for n in now) and len(set(now.values())) == 1:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"reload to {variant} not applied: {before} -> {now}")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        for gateway in self.gateways.values():
            for channel in gateway.channels.values():
                with contextlib.suppress(Exception):
                    await channel.close()
            if gateway.popen is not None and gateway.popen.poll() is None:
                gateway.popen.kill()
                gateway.popen.wait(10)
        if self._redis_client is not None:
            with contextlib.suppress(Exception):
                await self._redis_client.aclose()
        self.upstream.kill()
        self.relay.stop()
        self.redis.stop()
        shutil.rmtree(self.work, ignore_errors=True)
