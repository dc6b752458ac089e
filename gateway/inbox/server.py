"""Running the inbox under uvicorn, in-process (the CLI, the demo and the tests share this)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import uvicorn

from gateway.inbox.app import Inbox
from gateway.inbox.settings import InboxSettings
from gateway.state.embedded import RedisProcess


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
    embedded: EmbeddedRedis | None = None  # the private session store, when one was started

    async def stop(self) -> None:
        self.server.should_exit = True
        self.inbox.closing.set()  # ends live-update streams so the drain is quick
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.task, 10)
        finally:
            await self.stop_embedded()

    async def stop_embedded(self) -> None:
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)
            self.embedded = None


@dataclass
class EmbeddedRedis:
    """A private redis-server for the sessions of one inbox process; in a fresh temporary
    directory (removed at stop) unless `redis.data_dir` names one."""

    process: RedisProcess
    temporary: Path | None

    def stop(self) -> None:
        self.process.stop()
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)


def embedded_redis(settings: InboxSettings) -> tuple[InboxSettings, EmbeddedRedis | None]:
    """Settings whose session store has a URL: the configured one, or that of a private
    redis-server started now."""
    if settings.redis.url is not None:
        return settings, None
    temporary = None
    if settings.redis.data_dir:
        data = Path(settings.redis.data_dir).resolve() / "inbox-redis"
    else:
        temporary = data = Path(tempfile.mkdtemp(prefix="capgate-inbox-redis-"))
    try:
        process = RedisProcess(data).start()
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    embedded = EmbeddedRedis(process, temporary)
    return replace(settings, redis=replace(settings.redis, url=process.url)), embedded


async def start_inbox(
    settings: InboxSettings, *, inbox: Inbox | None = None, access_log: bool = False
) -> RunningInbox:
    """Serve the inbox on `settings.listen` (port 0 picks a free one); returns once listening."""
    embedded = None
    if inbox is None:
        settings, embedded = await asyncio.to_thread(embedded_redis, settings)
        inbox = Inbox(settings)
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
    try:
        while not server.started:
            if task.done():
                await task  # raises why it could not start
                raise RuntimeError("the inbox stopped while starting")
            await asyncio.sleep(0.02)
    except BaseException:
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        raise
    bound = server.servers[0].sockets[0].getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    return RunningInbox(inbox, server, task, f"http://{shown}:{bound[1]}", embedded)
