"""Issue 25 item 8: a reload that changes an upstream retires its channel, HTTP client and MCP
session, and they are closed once no snapshot in use holds them (ADR 0004 §11), through the
real gateway and real loopback upstreams:

- a call in flight on the old channel survives the reload and completes on it; then the old
  channel's connection is closed (seen by a TCP proxy in front of the upstream);
- reloading many times onto alternating addresses of a grpc, an http and an mcp upstream keeps
  open file descriptors, MCP sessions (each retired one gets its DELETE) and memory bounded.
  `CAPGATE_RELOAD_SOAK=N` runs N reloads instead of 500.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, procedure_pb2_grpc
from examples.mcp_upstream.server import Running
from examples.mcp_upstream.server import serve as serve_desk
from examples.orders.server import serve as serve_orders
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from tests.upstream_http.httpserver import HttpServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RELOADS = int(os.environ.get("CAPGATE_RELOAD_SOAK", "500"))
FD_SLACK = 12  # fds the last reload's resources and the servers' accept may still hold
RSS_SLACK_KB = 24 * 1024  # resident memory allowed to grow over all reloads (allocator noise)
OBJECT_SLACK = 10_000  # live Python objects allowed to grow (the test servers' own, mostly)

COMMON = """version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:0", surface: agent, auth: none}}
approvals: {{enabled: false}}
idempotency: {{enabled: false}}
audit: {{sinks: []}}
"""  # a str.format template, as the configs below


class Proxy:
    """A TCP proxy on loopback in front of `target`: it tells when the gateway closed every
    connection it opened through it (EOF from the gateway's side)."""

    def __init__(self, target: str) -> None:
        self._host, _, port = target.rpartition(":")
        self._port = int(port)
        self.open = 0
        self.accepted = 0
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def all_closed(self) -> None:
        """Until every connection the gateway opened here is closed by it."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.accepted > 0 and self.open == 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        back = asyncio.ensure_future(_pipe(up_reader, writer))
        self._tasks.add(back)
        try:
            await _pipe(reader, up_writer)  # ends when the gateway closes its side
        finally:
            up_writer.close()
            back.cancel()
            writer.close()
            async with self._changed:
                self.open -= 1
                self._changed.notify_all()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        return


class Gate(procedure_pb2_grpc.ProcedureServicer):  # type: ignore[misc]
    """A Procedure upstream whose `{"wait": true}` calls wait until the test lets them go."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        value = orjson.loads(request.input_json)
        if value.get("wait"):
            self.arrived.set()
            await self.release.wait()
        output = orjson.dumps({"passed": bool(value.get("wait"))}).decode()
        return procedure_pb2.ProcedureInvokeResponse(output_json=output)


GATE_CONFIG = (
    COMMON
    + """upstreams:
  gate: {{kind: procedure, address: "{address}"}}
capabilities:
  - id: gate.pass
    description: Pass the gate.
    upstream: gate
    side_effect: read
    risk: low
    expose: {{agent: true}}
    timeout: 30s
    input_schema:
      type: object
      additionalProperties: false
      properties: {{wait: {{type: boolean}}}}
"""
)


@pytest.fixture
async def gate() -> AsyncIterator[tuple[Gate, str]]:
    servicer = Gate()
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ProcedureServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, f"127.0.0.1:{port}"
    servicer.release.set()
    await server.stop(None)


async def _invoke(
    channel: grpc.aio.Channel, capability: str, value: Any
) -> gateway_pb2.ExecutionResult:
    stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
    request = gateway_pb2.InvokeRequest(capability_id=capability, input_json=orjson.dumps(value))
    result: gateway_pb2.ExecutionResult = await stub.Invoke(request, timeout=30)
    return result


async def _reload(gw: Gateway, path: Path, text: str) -> None:
    before = gw.holder.current.revision
    path.write_text(text)  # noqa: ASYNC240 - a small local file, in a test
    await gw.reload(load_settings(path))
    assert gw.holder.current.revision != before, "the reload was refused"


async def test_a_call_in_flight_finishes_on_the_old_channel_which_then_closes(
    gate: tuple[Gate, str], tmp_path: Path
) -> None:
    servicer, address = gate
    old, new = await Proxy(address).start(), await Proxy(address).start()
    path = tmp_path / "gateway.yaml"
    path.write_text(GATE_CONFIG.format(address=old.address))
    gw = await start(load_settings(path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")
    try:
        waiting = asyncio.ensure_future(_invoke(channel, "gate.pass", {"wait": True}))
        await servicer.arrived.wait()  # in flight on the old channel
        await _reload(gw, path, GATE_CONFIG.format(address=new.address))
        quick = await _invoke(channel, "gate.pass", {})
        assert quick.WhichOneof("outcome") == "completed", quick
        assert (new.accepted, old.open) == (1, 1)  # new calls go to the new address
        servicer.release.set()
        result = await waiting
        assert result.WhichOneof("outcome") == "completed", result
        assert orjson.loads(result.completed.output_json) == {"passed": True}
        # Its last call done, the old snapshot is gone and so is the old channel's connection
        # (without the fix it stayed open until the gateway stopped).
        await asyncio.wait_for(old.all_closed(), timeout=10)
        assert new.open == 1  # the current channel stays
    finally:
        await channel.close()
        await gw.stop(0.5)
        await old.stop()
        await new.stop()


async def _line(stream: asyncio.StreamReader, text: str) -> str:
    """The next line of a process's log that contains `text`."""
    while line := (await stream.readline()).decode():
        if text in line:
            return line
    raise AssertionError(f"the log ended before {text!r}")


async def test_capgate_serve_closes_the_first_snapshots_channel_after_a_reload(
    gate: tuple[Gate, str], tmp_path: Path
) -> None:
    """The real `capgate serve` and its config watcher: the channel of the snapshot it started
    with is closed too once a reload moved the upstream (the process kept a reference to the
    first snapshot, and with it that channel, for good)."""
    _, address = gate
    old, new = await Proxy(address).start(), await Proxy(address).start()
    path, ready = tmp_path / "gateway.yaml", tmp_path / "ready.json"
    path.write_text(GATE_CONFIG.format(address=old.address))
    process = await asyncio.create_subprocess_exec(
        *(str(Path(sys.executable).parent / "capgate"), "serve", "--config", str(path)),
        *("--ready-file", str(ready), "--watch-interval", "0.1", "--watch-settle", "0.05"),
        *("--workers", "1"),  # the process whose channels are counted
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        await asyncio.wait_for(_line(process.stderr, "capgate ready"), timeout=30)
        port = orjson.loads(ready.read_bytes())["ports"]["agents"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            first = await _invoke(channel, "gate.pass", {})
            assert first.WhichOneof("outcome") == "completed", first
            moved = tmp_path / "moved.yaml"
            moved.write_text(GATE_CONFIG.format(address=new.address))
            moved.replace(path)  # published with a rename, as docs/config.md says
            await asyncio.wait_for(_line(process.stderr, "reloaded: revision"), timeout=30)
            second = await _invoke(channel, "gate.pass", {})
            assert second.WhichOneof("outcome") == "completed", second
            assert new.accepted == 1
            await asyncio.wait_for(old.all_closed(), timeout=10)
            assert new.open == 1
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.communicate(), timeout=30)
        await old.stop()
        await new.stop()


SOAK_CONFIG = (
    COMMON
    + """upstreams:
  orders:
    kind: grpc
    address: "{orders}"
    descriptor_set: {descriptors}
  api: {{kind: http, address: "{api}"}}
  desk: {{kind: mcp, address: "{desk}", mcp: {{protocol: "2025-11-25"}}}}
capabilities:
  - id: orders.get
    description: Read one order.
    upstream: orders
    method: /orders.v1.Orders/GetOrder
    side_effect: read
    risk: low
    expose: {{agent: true}}
  - id: api.ping
    description: Ping the API.
    upstream: api
    http: {{method: GET, path: /ping}}
    side_effect: read
    risk: low
    expose: {{agent: true}}
    input_schema: {{type: object, additionalProperties: false}}
  - id: desk.search
    description: Search tickets.
    upstream: desk
    tool: search_tickets
    side_effect: read
    risk: low
    expose: {{agent: true}}
"""
)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


async def _keep_alive_timers_due() -> None:
    """Wait out the desks' keep-alive timers (uvicorn's 5 s): a closed connection's cancelled
    timer stays in the event loop's heap, holding the connection's objects, until it is due.
    Without the wait the count depends on the machine's speed (how many are still due)."""
    await asyncio.sleep(_DESK_KEEP_ALIVE_S + 0.5)


_DESK_KEEP_ALIVE_S = 5.0  # uvicorn.Config's timeout_keep_alive default


def _objects() -> int:
    gc.collect()
    return len(gc.get_objects())


class Sessions:
    """The MCP sessions two desks saw opened (a POST carrying a new session id) and ended
    (a DELETE), read from their request recorders (each keeps only its last 100 requests,
    so this is read after every reload)."""

    def __init__(self, *desks: Running) -> None:
        self.desks = desks
        self.opened: set[str] = set()
        self.deleted: list[str] = []

    def read(self) -> None:
        for desk in self.desks:
            for seen in desk.headers:
                session = seen.get("mcp-session-id")
                if session and seen[":method"] == "POST":
                    self.opened.add(session)
                elif session and seen[":method"] == "DELETE":
                    self.deleted.append(session)
            desk.headers.clear()


async def test_reloading_onto_moving_addresses_keeps_sockets_sessions_and_memory_bounded(
    tmp_path: Path,
) -> None:
    orders = [await serve_orders("127.0.0.1:0") for _ in range(2)]
    apis = [await HttpServer().start() for _ in range(2)]
    desks = [await serve_desk() for _ in range(2)]
    sessions = Sessions(*desks)
    descriptors = ROOT / "examples/orders/orders.pb"

    def config(i: int) -> str:
        return SOAK_CONFIG.format(
            orders=f"127.0.0.1:{orders[i % 2][1]}",
            api=apis[i % 2].address,
            desk=desks[i % 2].address,
            descriptors=descriptors,
        )

    path = tmp_path / "gateway.yaml"
    path.write_text(config(0))
    gw = await start(load_settings(path))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}")

    async def step(i: int) -> None:
        await _reload(gw, path, config(i))
        for capability, value in [
            ("orders.get", {"order_id": "o-1001"}),
            ("api.ping", {}),
            ("desk.search", {"query": "refund"}),
        ]:
            result = await _invoke(channel, capability, value)
            assert result.WhichOneof("outcome") == "completed", (i, capability, result)
        sessions.read()
        for api in apis:
            api.seen.clear()

    try:
        for i in range(1, 11):  # warm up: every lazy import and first-use cache filled
            await step(i)
        await gw.pool.retired_closed()
        await _keep_alive_timers_due()
        baseline = (_open_fds(), _objects(), _rss_kb())
        for i in range(11, RELOADS + 1):
            await step(i)
        await gw.pool.retired_closed()
        sessions.read()
        await _keep_alive_timers_due()
        now = (_open_fds(), _objects(), _rss_kb())
        print(
            f"{RELOADS} reloads: fds {baseline[0]} -> {now[0]}, live objects {baseline[1]} -> "
            f"{now[1]}, RSS {baseline[2] // 1024} -> {now[2] // 1024} MB, "
            f"{len(sessions.opened)} MCP sessions opened, {len(sessions.deleted)} deleted"
        )
        assert now[0] <= baseline[0] + FD_SLACK, (baseline, now)
        assert now[1] <= baseline[1] + OBJECT_SLACK, (baseline, now)
        assert now[2] <= baseline[2] + RSS_SLACK_KB, (baseline, now)
        # One session per reload (the client is new with the address); every one retired
        # was ended with its DELETE, exactly once; only the current one is left.
        assert len(sessions.opened) == RELOADS + 1, len(sessions.opened)
        assert len(sessions.deleted) == len(set(sessions.deleted)) == RELOADS
        assert len(sessions.opened - set(sessions.deleted)) == 1
    finally:
        await channel.close()
        await gw.stop(0.5)
        for server, _ in orders:
            await server.stop(None)
        for api in apis:
            await api.stop()
        for desk in desks:
            await desk.stop()
    sessions.read()
    assert sorted(sessions.deleted) == sorted(sessions.opened)  # the last one at shutdown
