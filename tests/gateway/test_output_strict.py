"""Upstream JSON meets the input rules (issue 14, item 2; DESIGN §12) through the real gateway:
a real `capgate.v1.Procedure` upstream on loopback answers hostile `output_json` — duplicate keys,
integers beyond 64 bits, NaN/Infinity — and the caller gets OUTPUT_INVALID with the output
withheld (executed, COMPLETED), while the boundary values themselves pass. Part of the family
is generated: random nested objects with one duplicate key or one out-of-range integer planted
at a random depth."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, procedure_pb2, procedure_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import token

pytestmark = pytest.mark.integration

CONFIG = """
version: 1
listeners:
  - name: agents
    address: 127.0.0.1:0
    surface: agent
    auth: jwt
    jwt:
      issuers: [test-idp]
      audience: capgate
      keys:
        - {kid: hs1, alg: HS256, secret: "{{ env.TEST_JWT_SECRET }}"}
upstreams:
  echo:
    address: "{{ env.TEST_ORDERS_ADDR }}"
    kind: procedure
capabilities:
  - id: echo.reply
    description: Answers the output_json it is told to.
    upstream: echo
    side_effect: read
    risk: low
    expose: {agent: true}
    input_schema:
      type: object
      additionalProperties: false
      required: [case]
      properties:
        case: {type: integer, minimum: 0}
audit:
  sinks: []
  hmac_key: "{{ env.TEST_HMAC_KEY }}"
redis:
  url: "{{ env.TEST_REDIS_URL }}"
  key_prefix: capgate-test-output
"""

REFUSED = [
    '{"a": 1, "a": 2}',
    '{"a": 1, "b": {"k": true, "k": false}}',
    '{"list": [{"x": 1}, {"y": 2, "y": 3}]}',
    '{"k": 1, "\\u006b": 2}',  # the same key, spelt with an escape
    '{"n": 18446744073709551616}',  # 2^64
    '{"n": -9223372036854775809}',  # -2^63 - 1
    '{"n": [1, 123456789012345678901234567890]}',
    '{"n": NaN}',
    '{"n": Infinity}',
    '{"n": -Infinity}',
    '{"n": 1e400}',
    '{"a": ',
    "",
]
ACCEPTED = [
    ('{"n": 18446744073709551615}', {"n": 2**64 - 1}),
    ('{"n": -9223372036854775808}', {"n": -(2**63)}),
    ('{"a": {"a": {"a": 1}}, "b": [{"a": 2}, {"a": 3}]}', None),  # same key, other objects
    ('{"s": "\\"k\\": 1, \\"k\\": 2"}', None),  # looks like keys, is one string
    ('{"k": 1, "K": 2}', None),
]


def _value(rng: random.Random, depth: int) -> Any:
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice([rng.randint(-1000, 1000), "v", True, None, 1.5])
    if rng.random() < 0.5:
        return [_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _value(rng, depth - 1) for i in range(rng.randint(1, 4))}


def _emit(node: Any, plant: str, state: list[int]) -> str:
    """JSON text of `node`; the object numbered `state[1]` (in emit order, from 0) gets the
    hostile construct `plant` ("dup": its first key again; "big": an integer of 2^65)."""
    if isinstance(node, dict):
        mine = state[0]
        state[0] += 1
        items = [f"{json.dumps(k)}: {_emit(v, plant, state)}" for k, v in node.items()]
        if mine == state[1]:
            extra = next(iter(node)) if plant == "dup" else "big"
            items.append(f"{json.dumps(extra)}: {36893488147419103232 if plant == 'big' else 0}")
        return "{" + ", ".join(items) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(_emit(v, plant, state) for v in node) + "]"
    return json.dumps(node)


def _objects(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + sum(_objects(v) for v in node.values())
    if isinstance(node, list):
        return sum(_objects(v) for v in node)
    return 0


def generated(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    made = 0
    while made < count:
        root = {"root": _value(rng, 5)}
        text = _emit(root, rng.choice(["dup", "big"]), [0, rng.randrange(_objects(root))])
        json.loads(text)  # still JSON to a lenient parser: only the strict rules refuse it
        made += 1
        yield text


class Echo(procedure_pb2_grpc.ProcedureServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.outputs: list[str] = []
        self.calls = 0

    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        self.calls += 1
        case = orjson.loads(request.input_json)["case"]
        return procedure_pb2.ProcedureInvokeResponse(output_json=self.outputs[case])


@pytest.fixture(scope="module")
async def echo_gateway(redis_server: RedisProcess) -> AsyncIterator[tuple[Echo, Gateway]]:
    echo = Echo()
    server = grpc.aio.server()
    procedure_pb2_grpc.add_ProcedureServicer_to_server(echo, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    run_dir = tempfile.mkdtemp(prefix="cg-out-")
    config = Path(run_dir) / "gateway.yaml"
    config.write_text(CONFIG)
    environ = gateway_environ(f"127.0.0.1:{port}", redis_server.url, run_dir)
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    yield echo, gw
    await gw.stop(0.5)
    await server.stop(0)


async def _invoke(gw: Gateway, echo: Echo, output_json: str) -> gateway_pb2.ExecutionResult:
    echo.outputs.append(output_json)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        request = gateway_pb2.InvokeRequest(
            capability_id="echo.reply",
            input_json=orjson.dumps({"case": len(echo.outputs) - 1}),
        )
        result: gateway_pb2.ExecutionResult = await gateway_pb2_grpc.CapabilityGatewayStub(
            channel
        ).Invoke(request, metadata=[("authorization", f"Bearer {token('alice')}")], timeout=10)
        return result


def assert_withheld(result: gateway_pb2.ExecutionResult, text: str) -> None:
    assert result.WhichOneof("outcome") == "failed", (text, result)
    assert types_pb2.ErrorCode.Name(result.failed.code) == "ERROR_CODE_OUTPUT_INVALID", text
    assert result.failed.executed_before_failure
    assert result.execution_state == types_pb2.EXECUTION_STATE_COMPLETED
    assert result.failed.message == "The operation failed."
    assert not result.failed.issues


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
async def test_hostile_upstream_json_is_output_invalid_and_withheld(
    echo_gateway: tuple[Echo, Gateway], text: str
) -> None:
    echo, gw = echo_gateway
    before = echo.calls
    assert_withheld(await _invoke(gw, echo, text), text)
    assert echo.calls == before + 1  # the upstream ran: its effect is not in doubt


async def test_generated_duplicate_keys_and_big_integers_are_withheld(
    echo_gateway: tuple[Echo, Gateway],
) -> None:
    echo, gw = echo_gateway
    for text in generated(seed=1402, count=40):
        assert_withheld(await _invoke(gw, echo, text), text)


@pytest.mark.parametrize(("text", "expected"), ACCEPTED, ids=range(len(ACCEPTED)))
async def test_boundary_values_and_repeated_keys_in_other_objects_pass(
    echo_gateway: tuple[Echo, Gateway], text: str, expected: Any
) -> None:
    echo, gw = echo_gateway
    result = await _invoke(gw, echo, text)
    assert result.WhichOneof("outcome") == "completed", (text, result)
    output = json.loads(result.completed.output_json)
    assert output == (expected if expected is not None else json.loads(text))
