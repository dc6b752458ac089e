"""Strict audit with no sink keeping a record (issue 25 item 6): "no audit record, no execution".

`capgate config check` and `capgate serve` (one loader) refuse `audit.strict: true` with
`audit.sinks: []` at the `strict` line, with or without webhooks (a notifier keeps no record).
A running gateway whose only audit consumer is the webhook notifier, or nothing at all, refuses
every strict call with AUDIT_UNAVAILABLE before the upstream: reached here by a reload that
turns strict on (sinks are built at start, so the running log still has none).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE as GATEWAY_TESTS
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CAPGATE = str(Path(sys.executable).parent / "capgate")
VALID = ROOT / "tests" / "config" / "broken" / "00-valid.yaml"
# Nothing listens there: an approval_requested notification would fail, nothing else is sent.
WEBHOOKS = {
    "inbox_base_url": "http://127.0.0.1:9/inbox",
    "webhooks": [{"name": "ops", "url": "http://127.0.0.1:9/hook", "secret": "s" * 32}],
}
MESSAGE = (
    "audit.strict: strict audit needs a sink in audit.sinks (webhook notifications keep no record)"
)


async def _run(*args: str) -> tuple[int | None, str, str]:
    """Exit code (None: still running after 60 s, then killed), stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPGATE_")}
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        return None, out.decode(), err.decode()
    return proc.returncode, out.decode(), err.decode()


def _strict_config(tmp: Path, *, webhooks: bool) -> tuple[Path, int]:
    """The broken corpus's valid config with `audit: {sinks: [], strict: true}`; the config
    and the line of `strict` in it."""
    text = VALID.read_text().replace("../../../examples", str(ROOT / "examples"))
    text = text.replace("paths: [policies/ok]", f"paths: [{VALID.parent / 'policies' / 'ok'}]")
    text = text.replace("audit: {sinks: [stdout]}\n", "audit:\n  sinks: []\n  strict: true\n")
    if webhooks:
        text += yaml.safe_dump({"notify": WEBHOOKS})
    path = tmp / "gateway.yaml"
    path.write_text(text)
    line = text.splitlines().index("  strict: true") + 1
    return path, line


@pytest.mark.parametrize("webhooks", [False, True], ids=["no-sink", "only-webhooks"])
async def test_check_and_serve_refuse_strict_audit_with_no_sink_at_its_line(
    tmp_path: Path, webhooks: bool
) -> None:
    path, line = _strict_config(tmp_path, webhooks=webhooks)
    assert yaml.safe_load(path.read_text())["audit"] == {"sinks": [], "strict": True}
    assert ("notify" in yaml.safe_load(path.read_text())) is webhooks
    check, serve = await asyncio.gather(
        _run(CAPGATE, "config", "check", str(path)),
        _run(CAPGATE, "serve", "--config", str(path), "--no-watch"),
    )
    code, out, err = check
    assert code == 1, (out, err)
    assert out.splitlines() == [f"{path}:{line}: {MESSAGE}", "1 problem"]
    code, _, err = serve
    assert code == 2, err  # refused at load: never started (None would mean it served)
    assert f"  {path}:{line}: {MESSAGE}" in err.splitlines()


def _gateway_config(tmp: Path, *, webhooks: bool) -> dict[str, Any]:
    data = yaml.safe_load((GATEWAY_TESTS / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies")]
    assert data["audit"]["sinks"] == []  # not strict: valid
    if webhooks:
        data["notify"] = WEBHOOKS
    (tmp / "gateway.yaml").write_text(yaml.safe_dump(data))
    return data


@pytest.mark.parametrize("webhooks", [False, True], ids=["no-sink", "only-webhooks"])
async def test_strict_turned_on_with_no_sink_running_refuses_before_the_upstream(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path, webhooks: bool
) -> None:
    """Started without audit sinks (valid: not strict), then reloaded with `strict: true` and a
    sink: the sink is not built by a reload, so nothing would keep `capability.started`. Without
    the fix the call ran (the notifier, dropping the event, counted as the sink, or no sink at
    all made the strict write return at once)."""
    data = _gateway_config(tmp_path, webhooks=webhooks)
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = gateway_environ(orders_upstream, redis_server.url, run_dir)
    gw = await start(load_settings(tmp_path / "gateway.yaml", environ=environ))
    env = Env(
        gw=gw,
        audit=None,  # type: ignore[arg-type]  # no memory sink: that would be a record
        orders_address=orders_upstream,
        socket_path=f"{run_dir}/capgate.sock",
    )
    try:
        assert (await env.invoke("orders.get", {"order_id": "o-1001"})).HasField("completed")
        data["audit"].update(sinks=["stdout"], strict=True)
        (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
        await gw.reload(load_settings(tmp_path / "gateway.yaml", environ=environ))
        assert gw.holder.current.settings.audit.strict
        await env.reset_upstream()
        result = await env.invoke("orders.get", {"order_id": "o-1001"})
        assert result.WhichOneof("outcome") == "failed", result
        assert result.failed.code == types_pb2.ERROR_CODE_AUDIT_UNAVAILABLE
        assert result.failed.stage == "audit"
        assert result.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
        assert await env.upstream_calls() == 0  # no audit record, no execution
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)
