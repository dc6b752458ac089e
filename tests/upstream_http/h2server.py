"""A real HTTP/2 server on loopback for the `kind: http` tests: TLS offering only `h2` by ALPN,
the `h2` protocol library on asyncio streams, one JSON answer per request; it records the
negotiated protocol and each request's pseudo-headers."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, RequestReceived, StreamEnded


class H2Server:
    def __init__(self, context: ssl.SSLContext, body: bytes) -> None:
        context.set_alpn_protocols(["h2"])
        self._context = context
        self._body = body
        self.requests: list[dict[str, str]] = []
        self.alpn: list[str | None] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> H2Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.alpn.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
        conn = H2Connection(config=H2Configuration(client_side=False))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        headers: dict[int, dict[str, str]] = {}
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    self._handle(conn, event, headers)
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def _handle(self, conn: H2Connection, event: Any, headers: dict[int, dict[str, str]]) -> None:
        if isinstance(event, RequestReceived):
            headers[event.stream_id] = {
                (k.decode() if isinstance(k, bytes) else k): (
                    v.decode() if isinstance(v, bytes) else v
                )
                for k, v in event.headers
            }
        elif isinstance(event, DataReceived):
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, StreamEnded):
            self.requests.append(headers.pop(event.stream_id, {}))
            conn.send_headers(
                event.stream_id,
                [
                    (":status", "200"),
                    ("content-type", "application/json"),
                    ("content-length", str(len(self._body))),
                ],
            )
            conn.send_data(event.stream_id, self._body, end_stream=True)
