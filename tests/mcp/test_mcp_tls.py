"""An MCP listener with TLS: served over https, and its challenge and metadata say so."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import ssl
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.config.settings import TlsSettings
from gateway.transport.mcp.server import envelope_limits, start_mcp_listener
from tests.auth.authkit import cert_pem, issue, make_ca, private_pem
from tests.mcp.mcpkit import ACCEPT, McpEnv, bearer, request

pytestmark = pytest.mark.integration


async def test_a_tls_listener_serves_https_and_its_metadata_says_so(
    mcp_env: McpEnv, tmp_path: Path
):
    ca = make_ca()
    cert, key = issue(ca, "capgate", ips=("127.0.0.1",)).write(tmp_path, "mcp")
    trust = ssl.create_default_context(cadata=cert_pem(ca.cert).decode())
    gw = mcp_env.gw
    plain = next(x for x in gw.settings.listeners if x.name == "mcp")
    listener = dataclasses.replace(plain, name="mcp-tls", tls=TlsSettings(cert, key))
    served = await start_mcp_listener(
        listener, lambda: gw.holder.current, gw.runtime, limits=envelope_limits(gw.settings)
    )
    base = f"https://127.0.0.1:{served.port}"
    hello = request(
        1,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "tls", "version": "1"},
        },
    )
    try:
        async with httpx2.AsyncClient(verify=trust, timeout=20) as http:
            refused = await http.post(f"{base}/mcp", json=hello, headers={"accept": ACCEPT})
            metadata = f"{base}/.well-known/oauth-protected-resource/mcp"
            assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'
            assert (await http.get(metadata)).json()["resource"] == f"{base}/mcp"
            accepted = await http.post(
                f"{base}/mcp",
                json=hello,
                headers={"accept": ACCEPT, "authorization": bearer("alice")},
            )
            assert accepted.status_code == 200
            assert accepted.json()["result"]["protocolVersion"] == "2025-11-25"
    finally:
        await served.stop(0.5)


async def _tls_listener(mcp_env: McpEnv, name: str, cert: str, key: str) -> Any:
    """A second MCP listener of the test gateway, with TLS from `cert` and `key`."""
    gw = mcp_env.gw
    plain = next(x for x in gw.settings.listeners if x.name == "mcp")
    listener = dataclasses.replace(plain, name=name, tls=TlsSettings(cert, key))
    return await start_mcp_listener(
        listener, lambda: gw.holder.current, gw.runtime, limits=envelope_limits(gw.settings)
    )


async def _trusted_by(served: Any, ca: Any) -> bool:
    """Whether a new connection that trusts only `ca` is served."""
    metadata = f"https://127.0.0.1:{served.port}/.well-known/oauth-protected-resource/mcp"
    trust = ssl.create_default_context(cadata=cert_pem(ca.cert).decode())
    async with httpx2.AsyncClient(verify=trust, timeout=5) as http:
        try:
            return (await http.get(metadata)).status_code == 200
        except httpx2.ConnectError:
            return False


def _put(path: str, data: bytes) -> None:
    """Replace a file atomically, as a rotation does."""
    Path(path + ".new").write_bytes(data)
    os.replace(path + ".new", path)


async def _until_trusted_by(served: Any, ca: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not await _trusted_by(served, ca):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


async def test_a_renewed_certificate_serves_new_connections_without_a_restart(
    mcp_env: McpEnv, tmp_path: Path
):
    first, second = make_ca("first"), make_ca("second")
    cert, key = issue(first, "capgate", ips=("127.0.0.1",)).write(tmp_path, "mcp")
    served = await _tls_listener(mcp_env, "mcp-rotating", cert, key)
    try:
        assert await _trusted_by(served, first)
        renewed = issue(second, "capgate", ips=("127.0.0.1",))
        # Key first, then certificate: in between the pair does not match and is not taken.
        _put(key, private_pem(renewed.key))
        _put(cert, cert_pem(renewed.cert))
        await _until_trusted_by(served, second, "the renewed certificate was never served")
        assert not await _trusted_by(served, first)
    finally:
        await served.stop(0.5)


async def test_a_rotation_the_tls_stack_refuses_never_breaks_the_listener(
    mcp_env: McpEnv, tmp_path: Path
):
    """A pair that matches but that OpenSSL refuses (a 1024-bit RSA key is below the security
    level) and an encrypted key are both kept out; the certificate in use keeps serving, and a
    good rotation afterwards is still taken."""
    first, second = make_ca("first"), make_ca("second")
    cert, key = issue(first, "capgate", ips=("127.0.0.1",)).write(tmp_path, "mcp")
    served = await _tls_listener(mcp_env, "mcp-guarded", cert, key)
    try:
        weak_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        weak = issue(first, "capgate", ips=("127.0.0.1",), key=weak_key)
        _put(key, private_pem(weak.key))
        _put(cert, cert_pem(weak.cert))
        await asyncio.sleep(2.5)  # two polls
        assert await _trusted_by(served, first)
        good = issue(second, "capgate", ips=("127.0.0.1",))
        locked = good.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
        _put(key, locked)
        _put(cert, cert_pem(good.cert))
        await asyncio.sleep(2.5)
        assert await _trusted_by(served, first)
        assert served.tls_watch is not None and not served.tls_watch.done()
        _put(key, private_pem(good.key))
        await _until_trusted_by(served, second, "the good rotation was never served")
    finally:
        await served.stop(0.5)
