"""Test helpers: a webhook receiver on loopback (real HTTP over TCP) and a gateway started from
tests/gateway/gateway.yaml with overrides (notify settings, the inbox allow-list)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config.loader import load_settings
from gateway.config.settings import Settings
from gateway.process.serve import Gateway, start

GATEWAY_YAML = Path(__file__).resolve().parents[1] / "gateway" / "gateway.yaml"
JWT_SECRET = "test-secret-0123456789-0123456789-abcdef"  # tests/gateway/harness.py's


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """Answers each POST with the next scripted status (the last one repeats); `hang` never
    answers. Records every request it read."""

    statuses: list[int] = field(default_factory=lambda: [200])
    hang: bool = False
    extra_headers: str = ""  # raw header lines added to every reply, e.g. "Retry-After: 7\r\n"
    requests: list[Request] = field(default_factory=list)
    server: asyncio.Server | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def start(self) -> Receiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1)

    async def wait_for(self, count: int, within_s: float = 5.0) -> list[Request]:
        async with asyncio.timeout(within_s):
            while len(self.requests) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.requests

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path = request_line.split(b" ")[1].decode()
            self.requests.append(Request(path, headers, body, asyncio.get_running_loop().time()))
            self.arrived.set()
            if self.hang:
                await asyncio.sleep(3600)
            status = self.statuses[min(len(self.requests) - 1, len(self.statuses) - 1)]
            reply = f"HTTP/1.1 {status} X\r\n{self.extra_headers}Content-Length: 0\r\n\r\n"
            writer.write(reply.encode())
            await writer.drain()
        finally:
            writer.close()


def environ_for(orders_address: str, redis_url: str, run_dir: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEST_JWT_SECRET": JWT_SECRET,
        "TEST_RUN_DIR": run_dir,
        "TEST_ORDERS_ADDR": orders_address,
        "TEST_REDIS_URL": redis_url,
        "TEST_HMAC_KEY": "test-hmac-key-not-secret-in-tests",
    }


def settings_for(orders_address: str, redis_url: str, **overrides: Any) -> Settings:
    """tests/gateway/gateway.yaml, loaded for real, with `overrides` replaced on Settings."""
    run_dir = tempfile.mkdtemp(prefix="cg-")  # short: unix socket paths are limited
    settings = load_settings(GATEWAY_YAML, environ=environ_for(orders_address, redis_url, run_dir))
    return dataclasses.replace(settings, **overrides)


async def start_gateway(settings: Settings) -> Gateway:
    return await start(settings)
