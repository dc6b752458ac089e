"""Soak: a bounded mixed load against a real `capgate serve` for minutes, sampling resources.

    python -m bench.soak --seconds 600          # `make soak` (SOAK_SECONDS)

Starts real processes on loopback: a Redis (AOF, own data directory), the example orders
upstream and `capgate serve`. A paced load runs the whole time: completed reads, policy denials,
approvals requested, approved on the admin listener and resumed, idempotent repeats, and
invalid input. Every `--interval` seconds it samples the gateway's RSS and open files
(/proc/PID/status, /proc/PID/fd), Redis DBSIZE, the entries of the approval indexes (sorted
sets) and Redis used_memory, and writes the series to bench/out/soak.json.

Records are short-lived in this config (idempotency TTL 20 s, approvals expire after 30 s and
are retained 30 s more), so after the warm-up (the first half of the run) nothing the gateway
keeps should grow. The verdict fits a least-squares line through the second half of each
series; the growth it projects over that half must stay within TOLERANCES (relative to the
half's mean, plus an absolute allowance). Runs shorter than MIN_JUDGED_S are not judged. The
exit status is 1 when a series grows beyond its tolerance, an unexpected reply was seen, or a
process died; 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import jwt
import orjson
import redis.asyncio as aioredis
import yaml

from bench import procs
from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc, types_pb2
from examples.orders import orders_pb2, orders_pb2_grpc
from gateway.state.embedded import RedisProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "soak.json"
PREFIX = "soak"
MIN_JUDGED_S = 60.0
WARMUP_FRACTION = 0.5

# metric: (relative growth allowed over the judged half, absolute allowance)
TOLERANCES: dict[str, tuple[float, float]] = {
    "rss_kb": (0.10, 4096.0),
    "open_files": (0.0, 5.0),
    "redis_keys": (0.10, 20.0),
    "approval_index_entries": (0.10, 20.0),
    "redis_used_memory": (0.15, 1_048_576.0),
}


@dataclass(frozen=True)
class Growth:
    metric: str
    first: float
    last: float
    projected: float  # slope x judged duration
    allowed: float

    @property
    def ok(self) -> bool:
        return self.projected <= self.allowed


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, value) points; 0 for fewer than two distinct times."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in points) / var


def judge(samples: list[dict[str, float]], seconds: float) -> list[Growth] | None:
    """Growth of every metric over the judged (second) half, or None when too short to judge."""
    if seconds < MIN_JUDGED_S or len(samples) < 4:
        return None
    start = samples[-1]["t"] * WARMUP_FRACTION
    judged = [s for s in samples if s["t"] >= start]
    if len(judged) < 3:
        return None
    span = judged[-1]["t"] - judged[0]["t"]
    out = []
    for metric, (relative, absolute) in TOLERANCES.items():
        points = [(s["t"], s[metric]) for s in judged]
        mean = sum(v for _, v in points) / len(points)
        out.append(
            Growth(
                metric,
                points[0][1],
                points[-1][1],
                slope(points) * span,
                relative * mean + absolute,
            )
        )
    return out


# --- the processes ---------------------------------------------------------------------------


def config(run_dir: Path, secret: str, redis_url: str, upstream: str) -> Path:
    jwt_keys = [{"kid": "soak", "alg": "HS256", "secret": secret}]
    data: dict[str, Any] = {
        "version": 1,
        "listeners": [
            {
                "name": "agents",
                "address": "127.0.0.1:0",
                "surface": "agent",
                "auth": "jwt",
                "jwt": {"issuers": ["soak-idp"], "audience": "capgate", "keys": jwt_keys},
            },
            {
                "name": "admin",
                "address": "127.0.0.1:0",
                "surface": "admin",
                "role": "admin",
                "auth": "jwt",
                "jwt": {"issuers": ["soak-idp"], "audience": "capgate-admin", "keys": jwt_keys},
            },
        ],
        "upstreams": {
            "orders": {
                "address": upstream,
                "kind": "grpc",
                "descriptor_set": str(ROOT / "examples/orders/orders.pb"),
            }
        },
        "capabilities": [
            {
                "id": "orders.get",
                "description": "Read one order.",
                "upstream": "orders",
                "method": "/orders.v1.Orders/GetOrder",
                "side_effect": "read",
                "risk": "low",
                "expose": {"agent": True},
            },
            {
                "id": "orders.refund",
                "description": "Refund (part of) an order.",
                "upstream": "orders",
                "method": "/orders.v1.Orders/RefundOrder",
                "side_effect": "write",
                "risk": "high",
                "expose": {"agent": True},
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["order_id", "amount"],
                    "properties": {
                        "order_id": {"type": "string", "minLength": 1, "maxLength": 64},
                        "amount": {"type": "number", "exclusiveMinimum": 0},
                        "reason": {"type": "string", "maxLength": 500},
                    },
                },
            },
        ],
        "policies": {"paths": [str(ROOT / "bench" / "soak_policies")]},
        "approvals": {"default_expires_in": "30s", "retention": "30s"},
        "idempotency": {"ttl": "20s"},
        "audit": {"sinks": [], "hmac_key": secrets.token_hex(16)},
        "redis": {"url": redis_url, "key_prefix": PREFIX},
    }
    path = run_dir / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def wait_port(port: int, proc: procs.Proc, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise procs.StartError(f"{proc.name} exited:\n{proc.log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise procs.StartError(f"{proc.name} did not listen on {port}")


# --- the load --------------------------------------------------------------------------------


def token(secret: str, sub: str, roles: list[str], audience: str) -> str:
    now = int(time.time())
    claims = {"sub": sub, "kind": "user", "roles": roles, "iss": "soak-idp", "aud": audience}
    claims |= {"iat": now, "exp": now + 600}
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "soak"})


class Load:
    """The paced mix. Each reply is tallied by what it was; a reply other than the one its
    request must get counts as unexpected."""

    def __init__(self, agents: grpc.aio.Channel, admin: grpc.aio.Channel, secret: str) -> None:
        self.gw = gateway_pb2_grpc.CapabilityGatewayStub(agents)
        self.admin = admin_pb2_grpc.ApprovalAdminStub(admin)
        self._secret = secret
        self._minted = 0.0
        self.md: list[tuple[str, str]] = []
        self.admin_md: list[tuple[str, str]] = []
        self.refresh()
        self.outcomes: Counter[str] = Counter()
        self.unexpected: Counter[str] = Counter()
        self.rounds = 0

    def refresh(self) -> None:
        """Tokens live 10 minutes (the gateway caps lifetimes): mint new ones every 4."""
        if time.monotonic() - self._minted < 240:
            return
        self._minted = time.monotonic()
        agent = token(self._secret, "agent", ["agent"], "capgate")
        manager = token(self._secret, "manager", ["manager", "approver"], "capgate-admin")
        self.md = [("authorization", f"Bearer {agent}")]
        self.admin_md = [("authorization", f"Bearer {manager}")]

    async def _invoke(self, capability: str, body: bytes, expect: str, **kw: Any) -> Any:
        request = gateway_pb2.InvokeRequest(capability_id=capability, input_json=body, **kw)
        return self._tally(expect, await self.gw.Invoke(request, metadata=self.md, timeout=10))

    def _tally(self, expect: str, result: Any) -> Any:
        outcome = result.WhichOneof("outcome")
        err = getattr(result, outcome) if outcome in ("failed", "cancelled") else None
        label = str(outcome)
        if err is not None:
            label += ":" + types_pb2.ErrorCode.Name(err.code).removeprefix("ERROR_CODE_")
        self.outcomes[label] += 1
        if label != expect:
            self.unexpected[f"{expect} -> {label}"] += 1
        return result

    async def mixed_round(self, n: int) -> None:
        self.refresh()
        await self._invoke("orders.get", b'{"order_id": "o-1001"}', "completed")
        await self._invoke(
            "orders.refund", b'{"order_id": "o-1001", "amount": 20000}', "failed:POLICY_DENIED"
        )
        await self._invoke(
            "orders.refund", b'{"order_id": "o-1001", "amount": NaN}', "failed:INPUT_INVALID"
        )
        key = f"soak-{n}"
        body = b'{"order_id": "slow-0", "amount": 1}'  # a fault id: the book stays as it is
        first = await self._invoke("orders.refund", body, "completed", idempotency_key=key)
        again = await self._invoke("orders.refund", body, "completed", idempotency_key=key)
        if again != first:
            self.unexpected["idempotent repeat did not replay"] += 1
        self.rounds += 1

    async def approval_round(self, control: orders_pb2_grpc.ControlStub) -> None:
        await control.Reset(orders_pb2.ResetRequest())  # o-1001 can take the refund again
        body = b'{"order_id": "o-1001", "amount": 800}'
        asked = await self._invoke("orders.refund", body, "approval_required")
        if asked.WhichOneof("outcome") != "approval_required":
            return
        approval = asked.approval_required.approval
        decided = await self.admin.DecideApproval(
            admin_pb2.DecideApprovalRequest(
                approval_id=approval.id,
                verdict=admin_pb2.VERDICT_APPROVE,
                note="soak",
                input_hash=approval.input_hash,
            ),
            metadata=self.admin_md,
            timeout=10,
        )
        if decided.HasField("error"):
            self.unexpected["decide refused"] += 1
            return
        resume = gateway_pb2.ResumeRequest(approval_id=approval.id)
        self._tally("completed", await self.gw.Resume(resume, metadata=self.md, timeout=10))
        self.rounds += 1


async def paced(period_s: float, stop: asyncio.Event, work: Any) -> None:
    n = 0
    next_at = time.monotonic()
    while not stop.is_set():
        await work(n)
        n += 1
        next_at += period_s
        delay = next_at - time.monotonic()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        else:
            next_at = time.monotonic()  # behind: no burst to catch up


# --- sampling --------------------------------------------------------------------------------


def rss_kb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return 0.0


def open_files(pid: int) -> float:
    return float(len(os.listdir(f"/proc/{pid}/fd")))


async def index_entries(client: aioredis.Redis) -> float:
    total = 0
    async for key in client.scan_iter(match=f"{PREFIX}:{{apr-idx}}*", count=500):
        if await client.type(key) == b"zset":
            total += await client.zcard(key)
    return float(total)


async def sample(pid: int, client: aioredis.Redis, t: float, load: Load) -> dict[str, float]:
    info = await client.info("memory")
    return {
        "t": round(t, 2),
        "rss_kb": rss_kb(pid),
        "open_files": open_files(pid),
        "redis_keys": float(await client.dbsize()),
        "approval_index_entries": await index_entries(client),
        "redis_used_memory": float(info["used_memory"]),
        # Not judged: the stream grows to its cap (MAXLEN ~ 10000, docs/approvals.md) first.
        "approval_events": float(await client.xlen(f"{PREFIX}:{{apr-events}}")),
        "rounds": float(load.rounds),
        "requests": float(sum(load.outcomes.values())),
    }


async def soak(seconds: float, interval: float, rate: float, out: Path) -> int:
    run_dir = Path(tempfile.mkdtemp(prefix="soak-"))
    secret = secrets.token_hex(24)
    redis = RedisProcess(run_dir / "redis").start()
    started: list[procs.Proc] = []
    try:
        up_port = free_port()
        argv = procs.python("examples.orders.server", "--address", f"127.0.0.1:{up_port}")
        upstream = procs.spawn("upstream", argv, run_dir).proc
        started.append(upstream)
        wait_port(up_port, upstream)
        cfg = config(run_dir, secret, redis.url, f"127.0.0.1:{up_port}")
        gateway = procs.gateway(run_dir, "gateway", cfg).wait()
        started.append(gateway)
        ports = gateway.ready["ports"]
        return await _drive(
            gateway, upstream, up_port, ports, redis, secret, seconds, interval, rate, out
        )
    finally:
        procs.stop_all(started)
        redis.stop()


async def _drive(
    gateway: procs.Proc,
    upstream: procs.Proc,
    up_port: int,
    ports: dict[str, int],
    redis: RedisProcess,
    secret: str,
    seconds: float,
    interval: float,
    rate: float,
    out: Path,
) -> int:
    pid = gateway.popen.pid
    client = aioredis.Redis.from_url(redis.url)
    agents = grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}")
    admin = grpc.aio.insecure_channel(f"127.0.0.1:{ports['admin']}")
    control_channel = grpc.aio.insecure_channel(f"127.0.0.1:{up_port}")
    control = orders_pb2_grpc.ControlStub(control_channel)
    load = Load(agents, admin, secret)
    stop = asyncio.Event()
    samples: list[dict[str, float]] = []
    begin = time.monotonic()
    workers = [
        asyncio.ensure_future(paced(1 / rate, stop, load.mixed_round)),
        asyncio.ensure_future(paced(4 / rate, stop, lambda _n: load.approval_round(control))),
    ]
    died = ""
    try:
        samples.append(await sample(pid, client, 0.0, load))
        while time.monotonic() - begin < seconds:
            await asyncio.sleep(min(interval, max(seconds - (time.monotonic() - begin), 0.01)))
            if not gateway.alive() or not upstream.alive():
                died = "gateway" if not gateway.alive() else "upstream"
                break
            if any(w.done() for w in workers):
                break
            samples.append(await sample(pid, client, time.monotonic() - begin, load))
            print(_line(samples[-1]), flush=True)
    finally:
        stop.set()
        results = await asyncio.gather(*workers, return_exceptions=True)
        for channel in (agents, admin, control_channel):
            await channel.close()
        await client.aclose()
    crashed = [repr(r) for r in results if isinstance(r, BaseException)]
    elapsed = time.monotonic() - begin
    growth = judge(samples, elapsed)
    failed = bool(died or crashed or load.unexpected) or (
        growth is not None and not all(g.ok for g in growth)
    )
    report = {
        "seconds": round(elapsed, 1),
        "interval_s": interval,
        "rate_rounds_per_s": rate,
        "tolerances": {k: {"relative": r, "absolute": a} for k, (r, a) in TOLERANCES.items()},
        "samples": samples,
        "outcomes": dict(load.outcomes),
        "unexpected": dict(load.unexpected),
        "worker_errors": crashed,
        "process_died": died,
        "growth": None if growth is None else [g.__dict__ | {"ok": g.ok} for g in growth],
        "verdict": "not judged (shorter than 60 s)"
        if growth is None and not failed
        else ("fail" if failed else "pass"),
    }
    write(out, report)
    _summary(report)
    return 1 if failed else 0


def write(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))


def _line(s: dict[str, float]) -> str:
    return (
        f"t={s['t']:7.1f}s rss={s['rss_kb'] / 1024:7.1f}MB fds={s['open_files']:4.0f} "
        f"keys={s['redis_keys']:6.0f} idx={s['approval_index_entries']:6.0f} "
        f"redis_mem={s['redis_used_memory'] / 1048576:6.2f}MB events={s['approval_events']:6.0f} "
        f"requests={s['requests']:8.0f}"
    )


def _summary(report: dict[str, Any]) -> None:
    print(f"soak: {report['seconds']} s, verdict {report['verdict']}")
    print(f"outcomes: {report['outcomes']}")
    if report["unexpected"] or report["worker_errors"] or report["process_died"]:
        print(f"unexpected: {report['unexpected']} errors: {report['worker_errors']}")
        print(f"process died: {report['process_died'] or '-'}")
    for g in report["growth"] or []:
        mark = "ok " if g["ok"] else "FAIL"
        print(
            f"  {mark} {g['metric']}: {g['first']:.0f} -> {g['last']:.0f}, projected growth "
            f"{g['projected']:.0f} over the judged half (allowed {g['allowed']:.0f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", "600"))
    )
    parser.add_argument(
        "--interval", type=float, default=float(os.environ.get("SOAK_INTERVAL", "10"))
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=float(os.environ.get("SOAK_RATE", "8")),
        help="mixed rounds per second (5 requests each); approval rounds run at rate/4",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    return asyncio.run(soak(args.seconds, args.interval, args.rate, args.out))


if __name__ == "__main__":
    sys.exit(main())
