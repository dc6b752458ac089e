"""An INPUT_INVALID issue for an unexpected property names the property, on every surface (the
gRPC envelope's issues, an MCP tool's isError result, the approval-status tool's arguments):
the property's name only, escaped to printable ASCII and bounded, never a value."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import grpc
import orjson
import pytest

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.values.validation import MAX_NAME_LENGTH, UNEXPECTED_PROPERTY, path_segment
from tests.gateway.harness import token
from tests.mcp.mcpkit import McpEnv

pytestmark = pytest.mark.integration

REFUND = {"order_id": "o-1001", "amount": 5}
SECRET = "s3cr3t-value-never-echoed"
PRINTABLE = set(string.printable) - set("\t\n\r\x0b\x0c")


async def _grpc_issues(env: McpEnv, value: dict[str, Any]) -> list[tuple[str, str]]:
    port = env.gw.ports()["agents"]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        result = await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            gateway_pb2.InvokeRequest(
                capability_id="orders.refund", input_json=orjson.dumps(value)
            ),
            metadata=[("authorization", f"Bearer {token('alice', audience='capgate')}")],
            timeout=10,
        )
    assert result.WhichOneof("outcome") == "failed"
    assert result.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID
    assert SECRET not in str(result)
    return [(i.path, i.message) for i in result.failed.issues]


async def _mcp_issues(env: McpEnv, tool: str, value: dict[str, Any]) -> list[tuple[str, str]]:
    async with env.client() as client:
        result = await client.call_tool(tool, value)
    assert result.is_error is True
    structured = result.structured_content
    assert structured is not None and structured["code"] == "INPUT_INVALID"
    assert SECRET not in json.dumps(structured)
    assert SECRET not in result.content[0].text  # type: ignore[union-attr]
    return [(i["path"], i["message"]) for i in structured["issues"]]


async def test_an_unexpected_property_is_named_on_grpc_and_mcp(mcp_env: McpEnv) -> None:
    value = {**REFUND, "note": SECRET, "zeta": 1}
    expected = [("$.note", UNEXPECTED_PROPERTY), ("$.zeta", UNEXPECTED_PROPERTY)]
    before = await mcp_env.upstream_calls("RefundOrder")
    assert await _grpc_issues(mcp_env, value) == expected
    assert await _mcp_issues(mcp_env, "orders_refund", value) == expected
    assert await mcp_env.upstream_calls("RefundOrder") == before


async def test_hostile_property_names_are_escaped_and_bounded(mcp_env: McpEnv) -> None:
    long = "x" * 5000
    # (U+0000 is refused before validation: tests/gateway/test_nul_strings.py; U+0001 is not.)
    value = {**REFUND, "a.b": SECRET, "\x01\n\u202e": SECRET, "<script>": SECRET, long: SECRET}
    expected = sorted(
        [
            ('$["\\u0001\\n\\u202e"]', UNEXPECTED_PROPERTY),
            ('$["<script>"]', UNEXPECTED_PROPERTY),
            ('$["a.b"]', UNEXPECTED_PROPERTY),
            (f'$["{"x" * MAX_NAME_LENGTH}"...]', UNEXPECTED_PROPERTY),
        ]
    )
    assert sorted(await _grpc_issues(mcp_env, value)) == expected
    assert sorted(await _mcp_issues(mcp_env, "orders_refund", value)) == expected


async def test_many_unexpected_properties_give_a_bounded_answer(mcp_env: McpEnv) -> None:
    value = {**REFUND, **{f"p{i:04d}": SECRET for i in range(2000)}}
    issues = await _grpc_issues(mcp_env, value)
    assert issues == [(f"$.p{i:04d}", UNEXPECTED_PROPERTY) for i in range(20)]


async def test_the_approval_status_tool_names_unexpected_arguments_the_same_way(
    mcp_env: McpEnv,
) -> None:
    value = {"approval_id": "a-1", "extra": SECRET, "a.b": SECRET, "y" * 300: SECRET}
    issues = await _mcp_issues(mcp_env, "capgate_approval_status", value)
    assert sorted(issues) == sorted(
        [
            ("$.extra", UNEXPECTED_PROPERTY),
            ('$["a.b"]', UNEXPECTED_PROPERTY),
            (f'$["{"y" * MAX_NAME_LENGTH}"...]', UNEXPECTED_PROPERTY),
        ]
    )


def _random_name(rng: random.Random) -> str:
    alphabet = [chr(c) for c in (*range(0, 0x80), 0x85, 0xA0, 0x2028, 0x202E, 0xFEFF, 0x1F600)]
    return "".join(rng.choice(alphabet) for _ in range(rng.choice((0, 1, 5, 64, 65, 300))))


def test_every_path_segment_is_printable_bounded_and_unambiguous() -> None:
    rng = random.Random(16)  # seeded: a failure reproduces
    parts: list[str | int] = [0, 7, "", "plain_name-1", "x" * 64, "x" * 65]
    parts += [_random_name(rng) for _ in range(500)]
    for part in parts:
        segment = path_segment(part)
        assert set(segment) <= PRINTABLE, repr(part)
        assert len(segment) <= 6 * MAX_NAME_LENGTH + 8
        if isinstance(part, int):
            assert segment == f"[{part}]"
        elif segment.startswith("."):
            assert segment[1:] == part
        else:
            cut = segment.endswith('"...]')
            assert cut == (len(part) > MAX_NAME_LENGTH)
            quoted = segment[1:-4] if cut else segment[1:-1]
            assert json.loads(quoted) == part[:MAX_NAME_LENGTH]


async def test_a_nul_in_a_tool_argument_is_refused_like_on_grpc(mcp_env: McpEnv) -> None:
    """The NUL rule (tests/gateway/test_nul_strings.py) holds for MCP tools/call too: the
    official client's JSON carries U+0000 as the escape the gateway parses, and refuses it."""
    value = {**REFUND, "order_id": "o-1001\x00; drop"}
    expected = [("$", "a string or key contains U+0000 (NUL)")]
    before = await mcp_env.upstream_calls("RefundOrder")
    assert await _grpc_issues(mcp_env, value) == expected
    assert await _mcp_issues(mcp_env, "orders_refund", value) == expected
    assert await mcp_env.upstream_calls("RefundOrder") == before
