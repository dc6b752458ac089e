"""A real HTTP/1.1 server on loopback for the `kind: http` tests: asyncio streams, the request
line and headers kept exactly as received (so a test asserts what actually went out), and the
answers scripted per test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from ssl import SSLContext


@dataclass
class Seen:
    method: str
    target: str  # the request-target exactly as sent: "/api/a%2Fb?x=1"
    headers: list[tuple[str, str]]
    body: bytes
    peer_cert: dict[str, object] | None = None  # over TLS: the client certificate, if any

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"{}"
    headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("content-type", "application/json")]
    )
    hang: bool = False  # never answer (the connection stays open)
    chunk: int = 0  # when set, the body goes out in writes of this many bytes, each drained


Handler = Callable[[Seen], Answer]


class HttpServer:
    """`answers` are used in order (the last one repeats); `handler`, when set, decides."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answers: list[Answer] = [Answer()]
        self.handler: Handler | None = None
        self.closed: list[Seen] = []  # requests whose connection the client closed unanswered
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, ssl: SSLContext | None = None) -> HttpServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def reset(self, *answers: Answer) -> None:
        self.seen.clear()
        self.closed.clear()
        self.answers = list(answers) or [Answer()]
        self.handler = None

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _next(self, seen: Seen) -> Answer:
        if self.handler is not None:
            return self.handler(seen)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, target, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
                headers: list[tuple[str, str]] = []
                while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = raw.decode("latin-1").rstrip("\r\n").partition(":")
                    headers.append((name, value.strip()))
                length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
                body = await reader.readexactly(length) if length else b""
                peer = writer.get_extra_info("peercert")
                seen = Seen(method, target, headers, body, peer)
                self.seen.append(seen)
                answer = self._next(seen)
                if answer.hang:  # until the client goes away (reading returns EOF)
                    await reader.read()
                    self.closed.append(seen)
                    return
                head = [f"HTTP/1.1 {answer.status} X", f"content-length: {len(answer.body)}"]
                head += [f"{k}: {v}" for k, v in answer.headers]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                step = answer.chunk or len(answer.body) or 1
                for at in range(0, len(answer.body), step):
                    writer.write(answer.body[at : at + step])
                    await writer.drain()
                    if answer.chunk:
                        await asyncio.sleep(0)  # let each piece go out on its own
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()
