"""A TCP relay between the gateways and the real Redis that can withhold Redis's replies.

Commands always reach Redis at once, so they run; only the replies wait. Holding them past the
gateway's 2 s command timeout (gateway/state/connections.py) makes a reply lost for a command that
ran
(what a timeout, a cancel or a dropped connection does in production); holding them briefly
slows every recording so that a caller's deadline lands between two awaits. (`CLIENT PAUSE`
cannot do this: a paused command whose client gives up and closes never runs.)

The relay runs its own event loop in a thread: the test's loop only runs during a step, and the
gateways' background Redis traffic must flow between steps too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from gateway.state.embedded import free_port


class RedisRelay:
    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.port = free_port()
        self._hold_until = 0.0  # monotonic: replies read before then are released then
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisRelay:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def hold_replies(self, seconds: float) -> float:
        """Withhold every reply Redis sends in the next `seconds`; returns when that ends
        (monotonic). Replies already on their way are not recalled."""
        self._hold_until = time.monotonic() + seconds
        return self._hold_until

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.redis_port)
        except OSError:  # Redis is down: the gateway sees a dropped connection
            client_w.close()
            return
        pumps = [
            asyncio.ensure_future(_pump(client_r, redis_w, lambda: 0.0)),
            asyncio.ensure_future(_pump(redis_r, client_w, lambda: self._hold_until)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_w, redis_w):
                writer.close()


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold_until: Callable[[], float]
) -> None:
    """Copy bytes in order; a chunk read while replies are held waits until the hold ends."""
    with contextlib.suppress(OSError, ConnectionError):
        while chunk := await reader.read(65536):
            wait = hold_until() - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
