"""The Python floor: a bare, generic grpc.aio passthrough proxy (DESIGN §11).

Any unary method is forwarded as opaque bytes (no deserialization on either side) over one
pooled channel, with the caller's remaining deadline. It governs nothing; what the gateway adds
on top of this hop is what governance costs.

    python -m bench.proxy --listen 127.0.0.1:0 --upstream 127.0.0.1:PORT --ready-file F
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import uvloop

_Forward = Callable[[bytes, Any], Awaitable[bytes]]


class Forwarder(grpc.GenericRpcHandler):
    """Builds one forwarding handler per method on first use and keeps it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = grpc.unary_unary_rpc_method_handler(self._forward(method))
            self._handlers[method] = handler
        return handler

    def _forward(self, method: str) -> _Forward:
        upstream = self._channel.unary_unary(method)  # no serializers: bytes in, bytes out

        async def forward(request: bytes, context: Any) -> bytes:
            try:
                reply: bytes = await upstream(request, timeout=context.time_remaining())
            except grpc.aio.AioRpcError as exc:
                await context.abort(exc.code(), exc.details() or "")
            return reply

        return forward


async def _main(args: argparse.Namespace) -> None:
    channel = grpc.aio.insecure_channel(args.upstream)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers([Forwarder(channel)])
    port = server.add_insecure_port(args.listen)
    await server.start()
    await channel.channel_ready()
    if args.ready_file:
        await asyncio.to_thread(Path(args.ready_file).write_text, json.dumps({"port": port}))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0.5)
    await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--upstream", required=True, help="host:port of the upstream")
    parser.add_argument("--ready-file", help="write {'port': N} here once serving")
    args = parser.parse_args()
    uvloop.run(_main(args))


if __name__ == "__main__":
    main()
