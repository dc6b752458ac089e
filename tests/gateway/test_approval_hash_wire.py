"""The approval-hash golden vectors through the real gateway: every case, sent as the input
`{"v": <case>}` of an approval-gated capability over gRPC, is bound to the approval by the hash
of `{"v":<canonical>}`; every refused text is refused (INPUT_INVALID) with no approval made."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import yaml

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import Gateway, start
from gateway.state.embedded import RedisProcess
from gateway.values.jsonvalue import has_nul
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import token

pytestmark = [pytest.mark.integration]
ROOT = HERE.parent.parent
DOC: dict[str, Any] = json.loads(
    (ROOT / "tests/vectors/approval_hash/vectors.json").read_text(encoding="utf-8")
)

POLICY = """\
policies:
  - name: vectors-need-approval
    description: Every call of vectors.hash waits for an approval (its hash is the subject).
    match:
      capabilities: [vectors.hash]
    rules:
      - when: "true"
        effect: require-approval
        message: Vectors wait for an approval.
        approval:
          approvers: {roles: [manager]}
"""


@pytest.fixture(scope="module")
async def gateway(
    orders_upstream: str, redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    tmp = tmp_path_factory.mktemp("hash-vectors")
    (tmp / "policies").mkdir()
    (tmp / "policies" / "vectors.yaml").write_text(POLICY)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    data["policies"]["paths"] = [str(ROOT / "examples/policies"), str(tmp / "policies")]
    data["capabilities"].append(
        {
            "id": "vectors.hash",
            "description": "Any JSON object; approval-gated.",
            "upstream": "orders-procedure",
            "side_effect": "write",
            "risk": "low",
            "expose": {"agent": True, "direct": True},
            "input_schema": {"type": "object"},
        }
    )
    data["approvals"]["max_pending_per_actor"] = 1000
    data["redis"]["key_prefix"] = "capgate-hash-vectors"
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    gw = await start(load_settings(config, environ=environ), extra_sinks=[MemorySink()])
    yield gw
    await gw.stop(0.5)


async def _invoke(gw: Gateway, body: bytes) -> gateway_pb2.ExecutionResult:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.ports()['agents']}") as channel:
        return await gateway_pb2_grpc.CapabilityGatewayStub(channel).Invoke(
            gateway_pb2.InvokeRequest(capability_id="vectors.hash", input_json=body),
            metadata=[("authorization", f"Bearer {token('alice')}")],
            timeout=10,
        )


def _has_nul(case: dict[str, Any]) -> bool:
    return has_nul(json.loads(case["input"]))


async def test_every_vector_binds_its_approval_by_the_expected_hash(gateway: Gateway) -> None:
    """Every case but those with U+0000, which the gateway refuses at its door (policies
    would read such a string only up to the NUL: gateway/values/jsonvalue.py)."""
    wrong: dict[str, tuple[str, str]] = {}
    for case in DOC["cases"]:
        body = b'{"v": ' + case["input"].encode("utf-8") + b"}"
        result = await _invoke(gateway, body)
        if _has_nul(case):
            assert result.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID, (case["name"], result)
            assert not result.approval_id
            continue
        assert result.WhichOneof("outcome") == "approval_required", (case["name"], result)
        canonical = b'{"v":' + case["canonical"].encode("utf-8") + b"}"
        expected = hashlib.sha256(canonical).hexdigest()
        got = result.approval_required.approval.input_hash
        if got != expected:
            wrong[case["name"]] = (got, expected)
    assert not wrong, wrong


async def test_every_refused_text_is_refused_before_any_approval(gateway: Gateway) -> None:
    for case in DOC["refused"]:
        body = b'{"v": ' + case["input"].encode("utf-8") + b"}"
        result = await _invoke(gateway, body)
        assert result.WhichOneof("outcome") == "failed", (case["name"], result)
        assert result.failed.code == types_pb2.ERROR_CODE_INPUT_INVALID, (case["name"], result)
        assert not result.approval_id
