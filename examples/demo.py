"""The main job: `make demo`. Starts the example upstream, the gateway (with the embedded Redis
when no URL is configured) and runs a scripted client through every kind of outcome: completed,
redacted, denied, concealed, invalid input, timeout, and the approval flow with a self-approval
refused. Exits 0 when every step behaved as documented. `DEMO_HOLD=1` keeps everything running
and prints the addresses and a caller credential.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import jwt
import orjson

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.orders.server import serve as serve_orders

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "config" / "gateway.yaml"
ISSUER = "demo-idp"


class Demo:
    def __init__(self, secret: str, ports: dict[str, int], socket_path: str):
        self.secret = secret
        self.ports = ports
        self.socket_path = socket_path
        self.agents = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
        self.admin = grpc.aio.insecure_channel(f"127.0.0.1:{ports['admin']}")
        self.failures: list[str] = []

    def token(self, sub: str, roles: list[str], audience: str = "capgate", lifetime: int = 3600) -> str:
        now = int(time.time())
        claims = {"sub": sub, "kind": "user", "roles": roles, "iss": ISSUER, "aud": audience,
                  "iat": now, "exp": now + lifetime}
        return jwt.encode(claims, self.secret, algorithm="HS256", headers={"kid": "demo"})

    def md(self, sub: str, roles: list[str], audience: str = "capgate") -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.token(sub, roles, audience)}")]

    async def invoke(self, who: tuple[str, list[str]], cap: str, value: Any = None, raw: bytes | None = None,
                     **kw: Any) -> gateway_pb2.ExecutionResult:
        stub = gateway_pb2_grpc.CapabilityGatewayStub(self.agents)
        body = raw if raw is not None else orjson.dumps(value or {})
        return await stub.Invoke(gateway_pb2.InvokeRequest(capability_id=cap, input_json=body, **kw),
                                 metadata=self.md(*who), timeout=10)

    def expect(self, title: str, result: gateway_pb2.ExecutionResult, outcome: str, code: str | None = None) -> None:
        got = result.WhichOneof("outcome")
        err = result.failed if got == "failed" else result.cancelled
        got_code = types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_") if got in ("failed", "cancelled") else None
        ok = got == outcome and (code is None or got_code == code)
        mark = "ok " if ok else "BAD"
        detail = ""
        if got == "completed":
            detail = result.completed.output_json
        elif got == "approval_required":
            a = result.approval_required.approval
            detail = f"approval {a.id[:8]}… reasons={list(a.reasons)}"
        elif got_code:
            detail = f"{got_code}: {err.message}" + (f" issues={[(i.path, i.message) for i in err.issues]}" if err.issues else "")
        print(f"  [{mark}] {title}\n        -> {got}: {detail[:160]}")
        if not ok:
            self.failures.append(title)


ALICE = ("alice", ["agent"])
BOB = ("bob", ["manager", "approver"])
CAROL = ("carol", ["manager", "approver", "agent"])


async def script(demo: Demo) -> None:
    stub = gateway_pb2_grpc.CapabilityGatewayStub(demo.agents)
    described = await stub.Describe(gateway_pb2.DescribeRequest(), metadata=demo.md(*ALICE))
    print(f"\nDescribe (agent surface, alice): {[c.id for c in described.capabilities]}")
    print("\nInvocations:")
    demo.expect("orders.get completes", await demo.invoke(ALICE, "orders.get", {"order_id": "o-1001"}), "completed")
    demo.expect("a small refund completes, card and email redacted",
                await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": 25}), "completed")
    demo.expect("a huge refund is denied by policy",
                await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": 50000}), "failed", "POLICY_DENIED")
    hidden = await demo.invoke(ALICE, "admin.orders.purge", {})
    unknown = await demo.invoke(ALICE, "admin.orders.nonexistent", {})
    demo.expect("an admin capability is concealed from a non-admin", hidden, "failed", "CAPABILITY_NOT_FOUND")
    demo.expect("... exactly like an unknown one", unknown, "failed", "CAPABILITY_NOT_FOUND")
    demo.expect("invalid input names the path, never the value",
                await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": "lots"}), "failed", "INPUT_INVALID")
    demo.expect("a slow upstream times out (effect unknown)",
                await demo.invoke(ALICE, "orders.cancel", {"order_id": "slow-5000", "reason": "demo"}), "cancelled", "TIMEOUT")

    print("\nApproval flow:")
    admin = admin_pb2_grpc.ApprovalAdminStub(demo.admin)
    pending = await demo.invoke(ALICE, "orders.refund", {"order_id": "o-1001", "amount": 750, "reason": "damaged"})
    demo.expect("a refund over 500 needs a manager's approval", pending, "approval_required")
    approval = pending.approval_required.approval
    carols = await demo.invoke(CAROL, "orders.refund", {"order_id": "o-1003", "amount": 900})
    self_try = await admin.DecideApproval(admin_pb2.DecideApprovalRequest(
        approval_id=carols.approval_required.approval.id, verdict=admin_pb2.VERDICT_APPROVE,
        input_hash=carols.approval_required.approval.input_hash), metadata=demo.md(*CAROL, audience="capgate-admin"))
    code = types_pb2.ErrorCode.Name(self_try.error.code).removeprefix("ERROR_CODE_")
    print(f"  [{'ok ' if code == 'APPROVAL_SELF_APPROVAL' else 'BAD'}] carol cannot approve her own request\n        -> {code}")
    if code != "APPROVAL_SELF_APPROVAL":
        demo.failures.append("self-approval refused")
    listed = await admin.ListApprovals(admin_pb2.ListApprovalsRequest(), metadata=demo.md(*BOB, audience="capgate-admin"))
    seen = next(a for a in listed.approvals if a.id == approval.id)
    print(f"  bob's inbox shows {len(listed.approvals)} pending; this one's input as he sees it: {seen.input_json}")
    decided = await admin.DecideApproval(admin_pb2.DecideApprovalRequest(
        approval_id=approval.id, verdict=admin_pb2.VERDICT_APPROVE, note="ok, damaged item",
        input_hash=seen.input_hash), metadata=demo.md(*BOB, audience="capgate-admin"))
    status = types_pb2.ApprovalStatus.Name(decided.approval.status)
    print(f"  [{'ok ' if status == 'APPROVAL_STATUS_APPROVED' else 'BAD'}] bob approves -> {status}")
    resumed = await stub.Resume(gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=demo.md(*ALICE))
    demo.expect("alice resumes: the refund runs once", resumed, "completed")
    again = await stub.Resume(gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=demo.md(*ALICE))
    same = again.execution_id == resumed.execution_id
    print(f"  [{'ok ' if same else 'BAD'}] a repeated Resume returns the stored envelope (same execution id)")
    if not same:
        demo.failures.append("repeated resume")


async def main() -> int:
    hold = os.environ.get("DEMO_HOLD") == "1"
    run_dir = Path(tempfile.mkdtemp(prefix="capgate-demo-"))
    secret = os.environ.get("CAPGATE_DEMO_JWT_SECRET") or secrets.token_urlsafe(32)
    orders, orders_port = await serve_orders("127.0.0.1:0")
    env = {**os.environ, "CAPGATE_DEMO_JWT_SECRET": secret, "CAPGATE_RUN_DIR": str(run_dir),
           "CAPGATE_ORDERS_ADDR": f"127.0.0.1:{orders_port}",
           "CAPGATE_DATA_DIR": str(run_dir / "data"),
           "CAPGATE_AUDIT_HMAC_KEY": secrets.token_urlsafe(24)}
    ready = run_dir / "ready.json"
    log = open(run_dir / "gateway.log", "wb")  # noqa: SIM115
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(CONFIG), "--ready-file", str(ready)],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if gateway.poll() is not None or time.monotonic() > deadline:
                print((run_dir / "gateway.log").read_text()[-4000:], file=sys.stderr)
                print("capgate did not start", file=sys.stderr)
                return 1
            await asyncio.sleep(0.1)
        ports = json.loads(ready.read_text())["ports"]
        print(f"capgate is up: agents 127.0.0.1:{ports['agents']}, admin 127.0.0.1:{ports['admin']}, "
              f"local unix:{run_dir}/capgate.sock; upstream orders 127.0.0.1:{orders_port}")
        demo = Demo(secret, ports, f"{run_dir}/capgate.sock")
        await script(demo)
        print(f"\nAudit trail (JSON lines, no payloads): {run_dir / 'gateway.log'}")
        if demo.failures:
            print(f"\nDEMO FAILED: {demo.failures}", file=sys.stderr)
            return 1
        print("\nAll demo steps behaved as documented.")
        if hold:
            print("\nDEMO_HOLD=1: everything keeps running. Try it by hand (Ctrl-C to stop):")
            print(f"  gateway (agents): 127.0.0.1:{ports['agents']}   admin: 127.0.0.1:{ports['admin']}")
            print(f"  caller credential (alice): {demo.token('alice', ['agent'], lifetime=8 * 3600)}")
            print(f"  approver credential (bob, admin listener): {demo.token('bob', ['manager', 'approver'], 'capgate-admin', 8 * 3600)}")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
        await demo.agents.close()
        await demo.admin.close()
        return 0
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(15)
        except subprocess.TimeoutExpired:
            gateway.kill()
        await orders.stop(0)
        log.close()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
