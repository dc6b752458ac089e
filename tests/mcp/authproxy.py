"""A loopback HTTP/1.1 proxy that adds one `Authorization` header to every request, for clients
that cannot send one (the official MCP conformance suite has no auth option).

Everything else passes unchanged, in both directions: the request line, every other header
(Host and Origin included, so the gateway's DNS-rebinding checks see what the client sent), the
body (`Content-Length` or chunked), and the response bytes as they stream (SSE included). A
client's own Authorization header is dropped. Requests on one connection are forwarded in order
over one upstream connection, so responses come back in order too.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

_MAX_HEAD = 64 * 1024  # bytes of a request line and its headers
_CHUNK = 64 * 1024


class BadRequest(Exception):
    """A request this proxy cannot frame: the connection is closed."""


@dataclass
class AuthProxy:
    target_host: str
    target_port: int
    authorization: str
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)

    async def stop(self) -> None:
        """Close every connection, then wait (bounded) for their tasks to end."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream_w: asyncio.StreamWriter | None = None
        back: asyncio.Task[None] | None = None
        try:
            upstream_r, upstream_w = await asyncio.open_connection(
                self.target_host, self.target_port
            )
            self._writers.add(upstream_w)
            back = asyncio.create_task(_pipe(upstream_r, writer))
            while await self._forward_one(reader, upstream_w):
                pass
            if upstream_w.can_write_eof():
                upstream_w.write_eof()
            await back
        except (BadRequest, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a connection either side ended, or a request that cannot be framed
        finally:
            if back is not None:
                back.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await back
            for w in (upstream_w, writer):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
            self._tasks.discard(task)

    async def _forward_one(
        self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter
    ) -> bool:
        """Forward one request; False at a clean end of the client's stream."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as eof:
            if eof.partial.strip():
                raise BadRequest from None
            return False
        request_line, *lines = head[:-4].split(b"\r\n")
        headers = [h for h in lines if not h.lower().startswith(b"authorization:")]
        headers.append(b"authorization: " + self.authorization.encode("ascii"))
        upstream.write(b"\r\n".join([request_line, *headers]) + b"\r\n\r\n")
        names = {h.split(b":", 1)[0].strip().lower(): h.split(b":", 1)[-1].strip() for h in lines}
        if b"chunked" in names.get(b"transfer-encoding", b"").lower():
            await _forward_chunked(reader, upstream)
        else:
            length = names.get(b"content-length", b"0")
            if not length.isdigit():
                raise BadRequest
            remaining = int(length)
            while remaining:
                data = await reader.readexactly(min(remaining, _CHUNK))
                upstream.write(data)
                remaining -= len(data)
        await upstream.drain()
        return True


async def _forward_chunked(reader: asyncio.StreamReader, upstream: asyncio.StreamWriter) -> None:
    while True:
        size_line = await reader.readuntil(b"\r\n")
        upstream.write(size_line)
        size_text = size_line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequest from None
        if size == 0:
            while True:  # trailers, then the empty line
                line = await reader.readuntil(b"\r\n")
                upstream.write(line)
                if line == b"\r\n":
                    return
        upstream.write(await reader.readexactly(size + 2))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
