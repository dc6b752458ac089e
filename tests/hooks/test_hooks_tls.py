"""A hook behind mutual TLS: the hook's channel is its upstream entry's (ca_file, client
certificate, server_name), through the upstreams' channel code. Without the client
certificate the hook cannot be reached and the call fails closed."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import yaml
from capgate_client.hook import serve_hooks

from capgate.v1 import types_pb2
from examples.hooks import reference
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import gateway_environ
from tests.gateway.harness import Env
from tests.hooks.conftest import ROOT
from tests.upstream.upstreamkit import Pki, make_pki

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("hook-pki"), "hooks.internal")


@pytest.fixture(scope="module")
async def tls_hook(pki: Pki) -> AsyncIterator[str]:
    credentials = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    server, port = await serve_hooks(
        "127.0.0.1:0", credentials=credentials, pre_invoke={"standing": reference.standing}
    )
    yield f"127.0.0.1:{port}"
    await server.stop(0)


def _config(tmp: Path, address: str, pki: Pki) -> Path:
    data = yaml.safe_load((ROOT / "tests/gateway/gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(ROOT / "examples/orders/orders.pb")
    tls = {"address": address, "kind": "grpc", "tls": True, "ca_file": str(pki.ca)}
    tls["server_name"] = "hooks.internal"
    data["upstreams"]["hooks-mtls"] = {
        **tls,
        "client_cert_file": str(pki.client_cert),
        "client_key_file": str(pki.client_key),
    }
    data["upstreams"]["hooks-nocert"] = tls
    standing = {"calls": ["pre_invoke"], "context": {"in_arrears": "boolean", "tier": "string"}}
    data["hooks"] = [
        {"name": "standing", "upstream": "hooks-mtls", "capabilities": ["orders.refund"]}
        | standing,
        {"name": "anon", "upstream": "hooks-nocert", "capabilities": ["orders.get"]}
        | {"calls": ["pre_invoke"]},
    ]
    data["policies"]["paths"] = [str(ROOT / "examples/hooks/policies")]
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
async def tls_hooked(
    orders: str,
    tls_hook: str,
    pki: Pki,
    redis_server: RedisProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Env]:
    run_dir = tempfile.mkdtemp(prefix="cg-")
    config = _config(tmp_path_factory.mktemp("tls-hooked"), tls_hook, pki)
    settings = load_settings(config, environ=gateway_environ(orders, redis_server.url, run_dir))
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders, socket_path=f"{run_dir}/x.sock")
    yield env
    for channel in env.channels.values():
        await channel.close()
    await gw.stop(0.2)


async def test_a_hook_behind_mutual_tls(tls_hooked: Env) -> None:
    late = await tls_hooked.invoke("orders.refund", {"order_id": "o-1003", "amount": 5})
    assert late.WhichOneof("outcome") == "approval_required", late  # the context arrived
    refused = await tls_hooked.invoke("orders.get", {"order_id": "o-1001"})
    assert refused.WhichOneof("outcome") == "failed", refused
    assert types_pb2.ErrorCode.Name(refused.failed.code) == "ERROR_CODE_HOOK_FAILED"
    assert refused.execution_state == types_pb2.EXECUTION_STATE_NOT_STARTED
