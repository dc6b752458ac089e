"""Rotating JWT verification keys without a restart: the JWKS file is part of the watched
revision, and a reload swaps the listener's authenticator. Driven through the real
`capgate serve` process, its config watcher and real gRPC calls."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ed25519
from jwt.algorithms import OKPAlgorithm

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import ready_ports, token

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = HERE.parent.parent


def _jwk(kid: str, key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    public = json.loads(OKPAlgorithm.to_jwk(key.public_key()))
    return {**public, "kid": kid, "alg": "EdDSA", "use": "sig"}


def _write(path: Path, data: bytes) -> None:
    """Atomically, as a mounted Secret or a key-rotation job would."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _token(kid: str, key: ed25519.Ed25519PrivateKey) -> str:
    return token("alice", key=key, alg="EdDSA", kid=kid)


async def _accepted(stub: Any, token: str) -> bool:
    try:
        await stub.Describe(
            gateway_pb2.DescribeRequest(), metadata=[("authorization", f"Bearer {token}")]
        )
    except grpc.aio.AioRpcError as exc:
        if exc.code() != grpc.StatusCode.UNAUTHENTICATED:
            raise
        return False
    return True


async def _eventually(stub: Any, token: str, expected: bool, within_s: float = 15) -> None:
    deadline = time.monotonic() + within_s
    while await _accepted(stub, token) != expected:
        assert time.monotonic() < deadline, f"token still {'refused' if expected else 'accepted'}"
        await asyncio.sleep(0.1)


async def test_rotating_the_jwks_file_takes_effect_without_a_restart(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    key_a, key_b = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    jwks = tmp_path / "jwks.json"
    _write(jwks, json.dumps({"keys": [_jwk("a", key_a)]}).encode())
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    agents = next(item for item in data["listeners"] if item["name"] == "agents")
    agents["jwt"] = {"issuers": ["test-idp"], "audience": "capgate", "jwks_file": str(jwks)}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    ready = tmp_path / "ready.json"
    env = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config)),
        *("--ready-file", str(ready), "--watch-interval", "0.1", "--grace", "1"),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        port = (await ready_ports(ready))["agents"]
        token_a, token_b = _token("a", key_a), _token("b", key_b)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.CapabilityGatewayStub(channel)
            assert await _accepted(stub, token_a)
            assert not await _accepted(stub, token_b)
            # Rotation, step 1: publish the new key next to the old one.
            _write(jwks, json.dumps({"keys": [_jwk("a", key_a), _jwk("b", key_b)]}).encode())
            await _eventually(stub, token_b, True)
            assert await _accepted(stub, token_a)
            # Step 2: retire the old key; its tokens stop working at once.
            _write(jwks, json.dumps({"keys": [_jwk("b", key_b)]}).encode())
            await _eventually(stub, token_a, False)
            assert await _accepted(stub, token_b)
            # A broken file is a config the watcher refuses: the running keys stay.
            _write(jwks, b"{not json")
            await asyncio.sleep(1.0)
            assert await _accepted(stub, token_b)
            # A listener change a reload cannot apply is reported, the old one keeps serving.
            _write(jwks, json.dumps({"keys": [_jwk("b", key_b)]}).encode())
            agents["address"] = "127.0.0.1:1"
            config.write_text(yaml.safe_dump(data))
            await asyncio.sleep(1.0)
            assert await _accepted(stub, token_b)
        os.kill(proc.pid, signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert proc.stderr is not None
        log = (await proc.stderr.read()).decode()
        assert "listener agents: authentication settings reloaded" in log
        assert "config change refused, keeping revision" in log  # the broken JWKS file
        assert "take a restart" in log
        assert "BEGIN" not in log and '"x"' not in log  # no key material in the log
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
            if proc.stderr is not None:  # shown by pytest when the test failed
                print((await proc.stderr.read()).decode()[-4000:])
