"""`redact.output_expr` values must be JSON (issue 14 follow-up C), through the real server,
the real upstream and real CEL: a `dyn` expression whose value has no JSON form (bytes, a
duration, a timestamp, a type, a map keyed by integers, NaN) answers OUTPUT_INVALID with
`executed_before_failure` and execution_state COMPLETED, output withheld; an expression whose
checked type has no JSON form is refused when the config loads."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import ConfigError, load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env, terminal_events

pytestmark = pytest.mark.integration

# Typed dyn: the load cannot know; stage 13 finds out.
AT_RUN_TIME = {
    "bytes": 'dyn(b"raw")',
    "duration": 'dyn(duration("1s"))',
    "timestamp": 'dyn(timestamp("2020-01-01T00:00:00Z"))',
    "type": "dyn(int)",
    "int-keys": "dyn({1: output.order_id})",
    "nested": '{"order": output.order_id, "raw": [dyn(b"x")]}',
    "nan": '{"x": 0.0 / 0.0}',
}
# Checked types with no JSON form: refused at load.
AT_LOAD = [
    'b"raw"',
    'duration("1s")',
    'timestamp("2020-01-01T00:00:00Z")',
    "int",
    '{"a": [b"x"]}',
    "{1: output.order_id}",
]


def _data(extra: dict[str, str]) -> dict[str, object]:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    for name, expr in extra.items():
        data["capabilities"].append(
            {**get, "id": f"orders.get-{name}", "tags": [name], "redact": {"output_expr": expr}}
        )
    return data


@pytest.fixture(scope="module")
async def expr_env(orders_upstream: str, redis_server: RedisProcess) -> AsyncIterator[Env]:
    tmp = Path(tempfile.mkdtemp(prefix="cg-oe-"))
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(_data(AT_RUN_TIME)))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        config, environ=gateway_environ(orders_upstream, redis_server.url, run_dir)
    )
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders_upstream, socket_path=f"{run_dir}/x.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


@pytest.mark.parametrize("name", sorted(AT_RUN_TIME))
async def test_a_value_without_json_form_is_output_invalid_after_the_upstream_ran(
    expr_env: Env, name: str
) -> None:
    env = expr_env
    await env.reset_upstream()
    result = await env.invoke(f"orders.get-{name}", {"order_id": "o-1001"})
    assert await env.upstream_calls() == 1
    assert result.WhichOneof("outcome") == "failed", result
    assert result.failed.code == types_pb2.ERROR_CODE_OUTPUT_INVALID, result
    assert result.failed.executed_before_failure
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert result.failed.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert not result.completed.output_json and b"o-1001" not in result.SerializeToString()
    (end,) = terminal_events(await env.events_for(result.execution_id))
    assert end["event"] == "capability.failed" and end["code"] == "OUTPUT_INVALID"
    assert end["executed_before_failure"] is True and end["execution_state"] == "COMPLETED"


@pytest.mark.parametrize("expr", AT_LOAD)
def test_a_checked_type_without_json_form_is_refused_at_load(tmp_path: Path, expr: str) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(_data({"bad": expr})))
    env = gateway_environ("127.0.0.1:1", "redis://127.0.0.1:1", str(tmp_path))
    with pytest.raises(ConfigError) as err:
        load_settings(config, environ=env)
    assert "output_expr" in str(err.value) and "no JSON form" in str(err.value)
