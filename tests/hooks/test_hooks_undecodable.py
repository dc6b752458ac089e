"""A hook that answers bytes that are not its response message is a hook failure under its
`failure` mode (docs/hooks.md), never EXECUTION_FAILED (issue 25 item 4). grpc.aio logs a
response deserializer's error and hands the caller `None`, so the gateway must refuse an answer
that is not the RPC's response message. The real gateway, real Redis, the example upstream and a
real loopback gRPC server whose Hook methods answer raw undecodable bytes (no serializer: the
handler's bytes go out as they are)."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
import yaml

from capgate.v1 import types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.hooks.conftest import hooked_config
from tests.hooks.test_hooks_pipeline import FAILED, code_of, terminal

pytestmark = [pytest.mark.integration]

# A varint tag that never ends: no protobuf message parses from it.
GARBAGE = b"\xff\xff\xff\xff"
ORDER = {"order_id": "o-1001"}
_CASES = {  # capability -> (hook, call, failure mode)
    "garbled.pre_closed": ("pre_closed", "pre_invoke", "closed"),
    "garbled.pre_open": ("pre_open", "pre_invoke", "open"),
    "garbled.post_closed": ("post_closed", "post_invoke", "closed"),
    "garbled.post_open": ("post_open", "post_invoke", "open"),
    "garbled.failure": ("failure", "post_failure", "closed"),
}


class GarbledHooks:
    """A `capgate.v1.Hook` server that answers every RPC with GARBAGE, counting the calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def _method(self, rpc: str) -> grpc.RpcMethodHandler:
        async def answer(_request: bytes, _context: Any) -> bytes:
            self.calls[rpc] += 1
            return GARBAGE

        return grpc.unary_unary_rpc_method_handler(answer)  # no (de)serializers: raw bytes

    def handler(self) -> grpc.GenericRpcHandler:
        rpcs = ("PreInvoke", "PostInvoke", "PostFailure")
        return grpc.method_handlers_generic_handler(
            "capgate.v1.Hook", {rpc: self._method(rpc) for rpc in rpcs}
        )


@pytest.fixture(scope="module")
async def garbled() -> AsyncIterator[tuple[GarbledHooks, str]]:
    hooks = GarbledHooks()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((hooks.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield hooks, f"127.0.0.1:{port}"
    await server.stop(0)


def _config(tmp: Path) -> Path:
    """The hooks tests' config plus one capability-scoped hook per case on the garbled server,
    and one capability (a copy of orders.get, outside the `orders.*` selectors) per case."""
    path = hooked_config(tmp)
    data = yaml.safe_load(path.read_text())
    data["upstreams"]["garbled"] = {"address": "{{ env.TEST_GARBLED_ADDR }}", "kind": "grpc"}
    get = next(c for c in data["capabilities"] if c["id"] == "orders.get")
    for cap_id, (hook, rpc, mode) in _CASES.items():
        data["hooks"].append(
            {
                "name": hook,
                "upstream": "garbled",
                "calls": [rpc],
                "scope": "capability",
                "timeout": "2s",
                "failure": mode,
            }
        )
        listed = [hook] if rpc != "post_failure" else ["pre_closed", hook]
        data["capabilities"].append({**get, "id": cap_id, "hooks": listed})
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
async def garbled_env(
    orders: str,
    hook_server: str,
    crasher: str,
    garbled: tuple[GarbledHooks, str],
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    environ = {
        **gateway_environ(orders, redis_server.url, run_dir),
        "TEST_HOOKS_ADDR": hook_server,
        "TEST_CRASHER_ADDR": crasher,
        "TEST_GARBLED_ADDR": garbled[1],
    }
    settings = load_settings(_config(tmp_path_factory.mktemp("garbled")), environ=environ)
    memory = MemorySink()
    gw = await start(settings, extra_sinks=[memory])
    env = Env(gw=gw, audit=memory, orders_address=orders, socket_path=f"{run_dir}/capgate.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


def _record(event: dict[str, Any], hook: str) -> dict[str, Any]:
    (record,) = [h for h in event["hooks"] if h["hook"] == hook]
    return record


NOT_A_RESPONSE = {
    "pre_invoke": "answer is not a PreInvokeResponse",
    "post_invoke": "answer is not a PostInvokeResponse",
    "post_failure": "answer is not a PostFailureResponse",
}


async def test_an_undecodable_pre_hook_answer_fails_closed_before_anything_ran(
    garbled_env: Env,
) -> None:
    before = await garbled_env.upstream_calls("GetOrder")
    result = await garbled_env.invoke("garbled.pre_closed", ORDER)
    assert code_of(result) == "HOOK_FAILED", result
    assert result.execution_state == FAILED and result.failed.retryable
    assert not result.failed.executed_before_failure
    assert await garbled_env.upstream_calls("GetOrder") == before
    record = _record(await terminal(garbled_env, result.execution_id), "pre_closed")
    assert record["error"] == NOT_A_RESPONSE["pre_invoke"] and "decision" not in record


async def test_an_undecodable_fail_open_pre_hook_answer_is_recorded_and_ignored(
    garbled_env: Env,
) -> None:
    result = await garbled_env.invoke("garbled.pre_open", ORDER)
    assert result.WhichOneof("outcome") == "completed", result
    record = _record(await terminal(garbled_env, result.execution_id), "pre_open")
    assert record["error"] == NOT_A_RESPONSE["pre_invoke"] and "decision" not in record


async def test_an_undecodable_post_hook_answer_fails_closed_and_withholds_the_output(
    garbled_env: Env,
) -> None:
    result = await garbled_env.invoke("garbled.post_closed", ORDER)
    assert code_of(result) == "HOOK_FAILED", result
    assert result.failed.executed_before_failure and not result.failed.retryable
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    event = await terminal(garbled_env, result.execution_id)
    assert "o-1001" not in orjson.dumps(event).decode()
    record = _record(event, "post_closed")
    assert record["error"] == NOT_A_RESPONSE["post_invoke"] and "decision" not in record


async def test_an_undecodable_fail_open_post_hook_answer_leaves_the_output_unchanged(
    garbled_env: Env,
) -> None:
    plain = await garbled_env.invoke("orders.get", ORDER)
    result = await garbled_env.invoke("garbled.post_open", ORDER)
    assert result.WhichOneof("outcome") == "completed", result
    assert orjson.loads(result.completed.output_json) == orjson.loads(plain.completed.output_json)
    record = _record(await terminal(garbled_env, result.execution_id), "post_open")
    assert record["error"] == NOT_A_RESPONSE["post_invoke"] and "decision" not in record


async def test_an_undecodable_post_failure_answer_is_an_error_not_an_observation(
    garbled_env: Env, garbled: tuple[GarbledHooks, str]
) -> None:
    hooks, _ = garbled
    before = hooks.calls["PostFailure"]
    result = await garbled_env.invoke("garbled.failure", ORDER)
    assert code_of(result) == "HOOK_FAILED", result  # its pre-hook, closed; PostFailure observes
    assert hooks.calls["PostFailure"] == before + 1
    record = _record(await terminal(garbled_env, result.execution_id), "failure")
    assert record["call"] == "post_failure"
    assert record["error"] == NOT_A_RESPONSE["post_failure"] and "decision" not in record
