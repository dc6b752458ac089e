"""Issue 14 item 11: request messages that do not decode (refused by grpcio before any
authentication) log one short line each, rate-limited, never a traceback or payload bytes;
the real `capgate serve` keeps serving."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import DecodeError

from capgate.v1 import admin_pb2, gateway_pb2, gateway_pb2_grpc
from gateway.state.embedded import RedisProcess
from gateway.transport import grpclog
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent
SENTINEL = "PAYLOAD-SENTINEL-7f3a"
# A length-delimited field 1 whose length runs past the end: no InvokeRequest decodes it.
GARBAGE = b"\x0a\xff\xff\xff\x07" + SENTINEL.encode()
FLOOD = 300
GATEWAY = gateway_pb2.DESCRIPTOR.services_by_name["CapabilityGateway"]
ADMIN_SERVICES = [
    admin_pb2.DESCRIPTOR.services_by_name[n] for n in ("ApprovalAdmin", "PolicyAdmin", "CacheAdmin")
]
_LINE = re.compile(r"undecodable request message for (\S+): refused with UNKNOWN(?: \((\d+) more)?")
_FLUSH = re.compile(r"undecodable request messages: (\d+) more suppressed")


def test_the_garbage_does_not_decode() -> None:
    with pytest.raises(DecodeError):
        gateway_pb2.InvokeRequest.FromString(GARBAGE)


async def test_a_flood_of_undecodable_messages_logs_a_bounded_number_of_short_lines(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        *("--config", str(HERE / "gateway.yaml"), "--ready-file", str(ready), "--no-watch"),
        *("--workers", "1"),  # one process's log: what it writes per undecodable message
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    # Read stderr all along: a full pipe would block the gateway's logging, not fail the test.
    stderr_read = asyncio.ensure_future(proc.stderr.read())
    try:
        ports = await ready_ports(ready)
        started = time.monotonic()
        codes: set[grpc.StatusCode] = set()
        for listener, method in (
            ("agents", "/capgate.v1.CapabilityGateway/Invoke"),
            ("admin", "/capgate.v1.ApprovalAdmin/ListApprovals"),
        ):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{ports[listener]}") as channel:
                raw = channel.unary_unary(method)  # no serializers: the bytes go as they are
                for _ in range(FLOOD // 2):
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await raw(GARBAGE, timeout=10)
                    codes.add(refused.value.code())
        elapsed = time.monotonic() - started
        assert codes == {grpc.StatusCode.UNKNOWN}
        # The server still serves.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{ports['agents']}") as channel:
            result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
                gateway_pb2.InvokeRequest(
                    capability_id="orders.get", input_json=b'{"order_id": "o-1001"}'
                ),
                metadata=[("authorization", f"Bearer {token('alice')}")],
                timeout=10,
            )
        assert result.WhichOneof("outcome") == "completed", result
        os.kill(proc.pid, signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        stderr_bytes = await asyncio.wait_for(stderr_read, 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = stderr_bytes.decode("utf-8", "replace")
    assert "Traceback" not in stderr
    assert SENTINEL not in stderr
    assert "DecodeError" not in stderr
    lines = [m for m in map(_LINE.search, stderr.splitlines()) if m]
    flushed = [int(m.group(1)) for m in map(_FLUSH.search, stderr.splitlines()) if m]
    limiter = grpclog.UndecodableRequests()
    bound = limiter.burst + math.ceil(elapsed * limiter.rate_per_s) + 1
    assert 1 <= len(lines) <= bound, stderr[-3000:]
    assert {m.group(1) for m in lines} <= {
        "/capgate.v1.CapabilityGateway/Invoke",
        "/capgate.v1.ApprovalAdmin/ListApprovals",
    }
    # Every message is accounted for: logged, or counted in a "suppressed" line.
    suppressed = sum(int(m.group(2) or 0) for m in lines) + sum(flushed)
    assert len(lines) + suppressed == FLOOD, stderr[-3000:]


def _decode_error_record() -> logging.LogRecord:
    try:
        gateway_pb2.InvokeRequest.FromString(GARBAGE)
    except DecodeError:
        exc_info = sys.exc_info()
    return logging.LogRecord(
        grpclog.LOGGER,
        logging.ERROR,
        __file__,
        1,
        "Unexpected [DecodeError] raised by servicer method [/capgate.v1.CapabilityGateway/Invoke]",
        (),
        exc_info,
    )


def test_the_bucket_lets_a_burst_through_then_one_line_per_refill() -> None:
    now = [100.0]
    limiter = grpclog.UndecodableRequests(burst=3, rate_per_s=0.5, clock=lambda: now[0])
    passed = [limiter.filter(_decode_error_record()) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7
    now[0] += 1.0  # half a token
    assert not limiter.filter(_decode_error_record())
    now[0] += 1.0  # a whole one
    record = _decode_error_record()
    assert limiter.filter(record)
    assert record.getMessage() == (
        "undecodable request message for /capgate.v1.CapabilityGateway/Invoke: refused with "
        "UNKNOWN (8 more suppressed since the last such line)"
    )
    assert record.levelname == "WARNING" and record.exc_info is None
    now[0] += 3600  # a long quiet spell refills no more than the burst
    assert [limiter.filter(_decode_error_record()) for _ in range(4)] == [True] * 3 + [False]


def test_other_errors_of_that_logger_keep_their_traceback() -> None:
    limiter = grpclog.UndecodableRequests(burst=0, rate_per_s=0.0, clock=lambda: 0.0)
    try:
        raise RuntimeError("a servicer bug")
    except RuntimeError:
        record = logging.LogRecord(
            grpclog.LOGGER,
            logging.ERROR,
            __file__,
            1,
            "Unexpected [RuntimeError]",
            (),
            sys.exc_info(),
        )
    assert limiter.filter(record)
    assert record.exc_info is not None and record.levelno == logging.ERROR


async def test_random_bytes_to_every_method_log_no_traceback_and_the_server_serves(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Seeded random messages (truncated fields, bad varints, invalid UTF-8 in strings, and
    some that happen to decode) to every unary method of a caller and an admin listener: each
    answer is a transport status, no record of grpcio's logger keeps a traceback, and the
    condensed lines stay within the bucket."""
    rng = random.Random(1414)
    methods = [
        ("agents", f"/{GATEWAY.full_name}/{m.name}")
        for m in GATEWAY.methods
        if not m.server_streaming and not m.client_streaming
    ] + [
        ("admin", f"/{service.full_name}/{m.name}")
        for service in ADMIN_SERVICES
        for m in service.methods
        if not m.server_streaming and not m.client_streaming
    ]
    samples = [b"\x0a\x05\xff\xfe\xfd\xfc\xfb", b"\x08", b"\x0a\x80"]  # bad UTF-8, cut varints
    samples += [rng.randbytes(rng.randint(1, 64)) for _ in range(120)]
    codes: dict[grpc.StatusCode, int] = {}
    installed = logging.getLogger(grpclog.LOGGER).filters
    limiter = next((f for f in installed if isinstance(f, grpclog.UndecodableRequests)), None)
    assert limiter is not None, "the gateway installed no filter on grpcio's logger"
    seen_before = limiter.seen
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=grpclog.LOGGER):
        for i, body in enumerate(samples):
            listener, method = methods[i % len(methods)]
            raw = env.channel(listener).unary_unary(method)
            try:
                await raw(body, timeout=10)  # no credentials: a decodable one is refused too
                codes[grpc.StatusCode.OK] = codes.get(grpc.StatusCode.OK, 0) + 1
            except grpc.aio.AioRpcError as err:
                codes[err.code()] = codes.get(err.code(), 0) + 1
    elapsed = time.monotonic() - started
    assert set(codes) <= {grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAUTHENTICATED}, codes
    assert codes.get(grpc.StatusCode.UNKNOWN, 0) >= 2  # the cut varints at least
    assert codes.get(grpc.StatusCode.UNKNOWN, 0) == limiter.seen - seen_before
    ours = [r for r in caplog.records if r.name == grpclog.LOGGER]
    assert all(r.exc_info is None and r.levelno == logging.WARNING for r in ours)
    assert all("Traceback" not in r.getMessage() for r in ours)
    assert len(ours) <= limiter.burst + math.ceil(elapsed * limiter.rate_per_s) + 1
    result = await env.invoke("orders.get", {"order_id": "o-1001"})
    assert result.WhichOneof("outcome") == "completed", result
