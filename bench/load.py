"""The load generator: one process, driven by JSON lines on stdin, one result line per job.

Every scenario is driven by this same generator (grpc.aio + uvloop; OPA's HTTP decision API by a
minimal asyncio HTTP/1.1 keep-alive client in the same process model), so client cost is equal
wherever the protocol is. Each job keeps `concurrency` calls in flight until `count` calls are
done or `seconds` have passed (whichever first), after `warmup` unrecorded calls. Requests are
pre-serialized bytes; every response is decoded and checked, so a misconfigured scenario shows
up as `bad` calls instead of a fast wrong figure. Loopback only: targets come from the harness.

    python -m bench.load        # then write jobs as JSON lines to stdin
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import uvloop

from capgate.v1 import admin_pb2, gateway_pb2, procedure_pb2

Call = Callable[[int], Awaitable[bool]]  # slot index -> response was as expected


def percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0 when empty)."""
    if not sorted_ms:
        return 0.0
    rank = max(1, round(q * len(sorted_ms) + 0.5 - 1e-9))
    return sorted_ms[min(rank, len(sorted_ms)) - 1]


def summarize(latencies_ms: list[float], elapsed_s: float, errors: int, bad: int) -> dict[str, Any]:
    ordered = sorted(latencies_ms)
    n = len(ordered)
    return {
        "calls": n,
        "errors": errors,
        "bad": bad,
        "elapsed_s": round(elapsed_s, 3),
        "calls_per_s": round(n / elapsed_s, 1) if elapsed_s > 0 else 0.0,
        "p50_ms": round(percentile(ordered, 0.50), 3),
        "p90_ms": round(percentile(ordered, 0.90), 3),
        "p99_ms": round(percentile(ordered, 0.99), 3),
        "p999_ms": round(percentile(ordered, 0.999), 3),
        "max_ms": round(ordered[-1], 3) if ordered else 0.0,
        "mean_ms": round(sum(ordered) / n, 3) if n else 0.0,
    }


async def drive(call: Call, *, concurrency: int, count: int, seconds: float) -> dict[str, Any]:
    """Keep `concurrency` calls in flight; bounded by `count` calls and `seconds`."""
    latencies: list[float] = []
    issued = 0
    errors = bad = 0
    first_error = ""
    perf = time.perf_counter
    started = perf()
    deadline = started + seconds
    last = started

    async def slot(index: int) -> None:
        nonlocal issued, errors, bad, first_error, last
        while issued < count and perf() < deadline:
            issued += 1
            t0 = perf()
            try:
                ok = await call(index)
            except Exception as exc:  # an RPC error is a result to report, not a crash
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            last = perf()
            latencies.append((last - t0) * 1000.0)
            if not ok:
                bad += 1

    await asyncio.gather(*(slot(i) for i in range(concurrency)))
    result = summarize(latencies, last - started, errors, bad)
    result["first_error"] = first_error
    return result


def _check_response(kind: str, expect: Any) -> Callable[[bytes], bool]:
    if kind == "procedure":
        return lambda raw: bool(procedure_pb2.ProcedureInvokeResponse.FromString(raw).output_json)
    if kind == "invoke":
        return lambda raw: (
            gateway_pb2.ExecutionResult.FromString(raw).WhichOneof("outcome") == expect
        )
    if kind == "check":
        return lambda raw: gateway_pb2.CheckResponse.FromString(raw).decision == expect
    if kind == "describe":
        return lambda raw: len(gateway_pb2.DescribeResponse.FromString(raw).capabilities) >= expect
    raise ValueError(f"unknown response check {kind!r}")


def _channels(target: str, n: int) -> list[grpc.aio.Channel]:
    # A local subchannel pool per channel: n channels are n TCP connections (SO_REUSEPORT
    # balances connections, not calls, across workers).
    options = [("grpc.use_local_subchannel_pool", 1)] if n > 1 else []
    return [grpc.aio.insecure_channel(target, options=options) for _ in range(n)]


async def unary_job(job: dict[str, Any]) -> dict[str, Any]:
    channels = _channels(job["target"], int(job.get("channels", 1)))
    try:
        for channel in channels:
            await asyncio.wait_for(channel.channel_ready(), 10)
        stubs = [channel.unary_unary(job["method"]) for channel in channels]
        request = base64.b64decode(job["request"])
        metadata = tuple((k, v) for k, v in job.get("metadata", ()))
        check = _check_response(job["check"], job.get("expect"))
        n = len(stubs)

        async def call(index: int) -> bool:
            raw: bytes = await stubs[index % n](request, metadata=metadata, timeout=30)
            return check(raw)

        return await _measured(call, job)
    finally:
        for channel in channels:
            await channel.close()


async def approval_job(job: dict[str, Any]) -> dict[str, Any]:
    """invoke → approval_required; approver decides on the admin listener; requester resumes."""
    caller = grpc.aio.insecure_channel(job["target"])
    admin = grpc.aio.insecure_channel(job["admin_target"])
    try:
        invoke = caller.unary_unary(
            "/capgate.v1.CapabilityGateway/Invoke",
            response_deserializer=gateway_pb2.ExecutionResult.FromString,
        )
        resume = caller.unary_unary(
            "/capgate.v1.CapabilityGateway/Resume",
            request_serializer=gateway_pb2.ResumeRequest.SerializeToString,
            response_deserializer=gateway_pb2.ExecutionResult.FromString,
        )
        decide = admin.unary_unary(
            "/capgate.v1.ApprovalAdmin/DecideApproval",
            request_serializer=admin_pb2.DecideApprovalRequest.SerializeToString,
            response_deserializer=admin_pb2.DecideApprovalResponse.FromString,
        )
        request = base64.b64decode(job["request"])
        caller_md = tuple((k, v) for k, v in job["metadata"])
        admin_md = tuple((k, v) for k, v in job["admin_metadata"])

        async def call(_index: int) -> bool:
            first = await invoke(request, metadata=caller_md, timeout=30)
            if first.WhichOneof("outcome") != "approval_required":
                return False
            approval = first.approval_required.approval
            decided = await decide(
                admin_pb2.DecideApprovalRequest(
                    approval_id=approval.id,
                    verdict=admin_pb2.VERDICT_APPROVE,
                    input_hash=approval.input_hash,
                ),
                metadata=admin_md,
                timeout=30,
            )
            if decided.HasField("error"):
                return False
            final = await resume(
                gateway_pb2.ResumeRequest(approval_id=approval.id), metadata=caller_md, timeout=30
            )
            return final.WhichOneof("outcome") == "completed"

        await asyncio.wait_for(caller.channel_ready(), 10)
        await asyncio.wait_for(admin.channel_ready(), 10)
        return await _measured(call, job)
    finally:
        await caller.close()
        await admin.close()


async def http_job(job: dict[str, Any]) -> dict[str, Any]:
    """POST the same body (with the job's extra `headers`) on one keep-alive HTTP/1.1 connection
    per in-flight slot."""
    host, port = job["host"], int(job["port"])
    body = job["body"].encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in job.get("headers", {}).items())
    head = (
        f"POST {job['path']} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request = head + body
    expect = job["expect"].encode()
    concurrency = int(job["concurrency"])
    conns = [await asyncio.open_connection(host, port) for _ in range(concurrency)]

    async def call(index: int) -> bool:
        reader, writer = conns[index]
        writer.write(request)
        header = await reader.readuntil(b"\r\n\r\n")
        if not header.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(header.split(b"\r\n", 1)[0].decode(errors="replace"))
        length = 0
        for line in header.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        payload = await reader.readexactly(length)
        return expect in payload

    try:
        return await _measured(call, job)
    finally:
        for _, writer in conns:
            writer.close()


async def _measured(call: Call, job: dict[str, Any]) -> dict[str, Any]:
    concurrency = int(job["concurrency"])
    warmup = int(job.get("warmup", 0))
    warmed = 0
    if warmup:
        first = await drive(
            call, concurrency=concurrency, count=warmup, seconds=float(job["seconds"])
        )
        warmed = first["calls"] + first["errors"]
    result = await drive(
        call, concurrency=concurrency, count=int(job["count"]), seconds=float(job["seconds"])
    )
    result["warmup_calls"] = warmed
    return result


JOBS = {"unary": unary_job, "approval": approval_job, "http": http_job}


async def serve_jobs() -> None:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        job = json.loads(line)
        try:
            result = await JOBS[job["kind"]](job)
        except Exception as exc:  # reported to the harness, which records the scenario failed
            result = {"failed": f"{type(exc).__name__}: {str(exc)[:500]}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def main() -> None:
    uvloop.run(serve_jobs())


if __name__ == "__main__":
    main()
