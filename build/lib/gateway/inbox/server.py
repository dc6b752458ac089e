"""Running the inbox under uvicorn, in-process (the CLI, the demo and the tests share this)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import uvicorn

from gateway.inbox.app import Inbox
from gateway.inbox.settings import InboxSettings


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("the listen address must be host:port")
    return host.strip("[]"), int(port)


@dataclass
class RunningInbox:
    inbox: Inbox
    server: uvicorn.Server
    task: asyncio.Task[Any]
    url: str

    async def stop(self) -> None:
        self.server.should_exit = True
        self.inbox.closing.set()  # ends live-update streams so the drain is quick
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self.task, 10)


async def start_inbox(
    settings: InboxSettings, *, inbox: Inbox | None = None, access_log: bool = False
) -> RunningInbox:
    """Serve the inbox on `settings.listen` (port 0 picks a free one); returns once listening."""
    inbox = inbox or Inbox(settings)
    host, port = split_address(settings.listen)
    config = uvicorn.Config(
        inbox.app,
        host=host,
        port=port,
        lifespan="on",
        access_log=access_log,
        log_config=None,
        timeout_graceful_shutdown=2,
        server_header=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(), name="inbox-http")
    while not server.started:
        if task.done():
            await task  # raises why it could not start
            raise RuntimeError("the inbox stopped while starting")
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    return RunningInbox(inbox, server, task, f"http://{shown}:{bound[1]}")
