"""The command lines the held demo prints (`DEMO_HOLD=1 make demo`) run as printed: against the
demo config's gateway (its listeners on free ports, its embedded Redis), pasted into a shell."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from examples import demo
from gateway.config.loader import load_settings
from gateway.serve import Gateway, start

pytestmark = pytest.mark.integration

SECRET = "demo-commands-" + "s" * 32


@pytest.fixture
async def demo_gateway(orders_upstream: str) -> AsyncIterator[demo.Demo]:
    """examples/config/gateway.yaml as the demo runs it, on free ports, with the embedded Redis."""
    run_dir = tempfile.mkdtemp(prefix="cg-demo-")
    environ = {
        "CAPGATE_DEMO_JWT_SECRET": SECRET,
        "CAPGATE_AUDIT_HMAC_KEY": "demo-commands-" + "h" * 32,
        "CAPGATE_RUN_DIR": run_dir,
        "CAPGATE_ORDERS_ADDR": orders_upstream,
    }
    settings = load_settings(demo.CONFIG, environ=environ)
    listeners = tuple(
        dataclasses.replace(item, address="127.0.0.1:0") if item.name != "local" else item
        for item in settings.listeners
        if item.name in {"agents", "admin", "local"}
    )
    gw: Gateway = await start(dataclasses.replace(settings, listeners=listeners))
    assert gw.redis_process is not None  # the demo config names no Redis: the embedded one
    running = demo.Demo(SECRET, gw.ports(), f"{run_dir}/capgate.sock", gw.redis_process.url)
    yield running
    await running.agents.close()
    await running.admin.close()
    await gw.stop(0.5)


def _shell(script: str) -> subprocess.CompletedProcess[str]:
    # The demo prints paths relative to where it runs: run them from the same place.
    return subprocess.run(
        ["bash", "-c", script],
        cwd=Path.cwd(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_the_printed_approval_and_audit_commands_work_as_pasted(
    demo_gateway: demo.Demo,
) -> None:
    waiting = await demo_gateway.invoke(
        demo.ALICE, "orders.refund", {"order_id": "o-1002", "amount": 1200, "reason": "lost"}
    )
    approval = waiting.approval_required.approval
    assert approval.id
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        demo.print_cli(demo_gateway, approval.id, approval.input_hash)
    lines = [line.strip() for line in printed.getvalue().splitlines()]
    export = next(line for line in lines if line.startswith("export CAPGATE_ADMIN="))
    capgate = demo.capgate_command()
    commands = {
        " ".join(line.removeprefix(capgate).split()[:2]): line
        for line in lines
        if line.startswith(capgate + " ")
    }
    assert set(commands) == {
        "approvals list",
        "approvals show",
        "approvals approve",
        "approvals watch",
        "audit query",
        "audit tail",
    }

    listed = await asyncio.to_thread(_shell, f"{export}\n{commands['approvals list']}")
    assert listed.returncode == 0, listed.stderr
    assert approval.id in listed.stdout
    shown = await asyncio.to_thread(_shell, f"{export}\n{commands['approvals show']}")
    assert shown.returncode == 0, shown.stderr
    assert approval.input_hash in shown.stdout
    decided = await asyncio.to_thread(_shell, f"{export}\n{commands['approvals approve']}")
    assert decided.returncode == 0, decided.stderr
    assert decided.stdout == f"{approval.id}: approved\n"

    await asyncio.sleep(0.5)  # the audit log writes in the background
    queried = await asyncio.to_thread(_shell, commands["audit query"])
    assert queried.returncode == 0, queried.stderr
    events = [json.loads(line) for line in queried.stdout.splitlines()]
    assert "capability.approval_requested" in {e["event"] for e in events}
    assert "capability.approved" in {e["event"] for e in events}
    # The following commands run until stopped: they start and wait without an error.
    for name in ("approvals watch", "audit tail"):
        script = f"{export}\ntimeout 3 {commands[name]}"
        followed = await asyncio.to_thread(_shell, script)
        assert followed.returncode == 124, (name, followed.stderr)
        assert followed.stderr == "", name
