"""A hook process that crashes (exits) while answering its first PreInvoke: run as a
subprocess by the tests, it prints `listening <port>` once it serves."""

from __future__ import annotations

import asyncio
import os
import sys

from capgate_client.hook import PreInvoke, PreInvokeResult, serve_hooks


def crash(_: PreInvoke) -> PreInvokeResult:
    os._exit(3)  # mid-call: the gateway's RPC loses its connection


async def main() -> None:
    server, port = await serve_hooks("127.0.0.1:0", pre_invoke=crash)
    print(f"listening {port}", flush=True)
    await server.wait_for_termination(timeout=120)  # bounded: the test kills it sooner


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
