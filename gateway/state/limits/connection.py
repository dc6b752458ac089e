"""Where limit state lives (ADR 0037): its own Redis, so a check does not wait for the fsync
that approvals need.

- `redis.limits_url` set: limits use that Redis (shared by every replica, like `redis.url`),
  with whatever persistence it is run with (docs/limits.md recommends `appendfsync everysec`).
- Neither `redis.limits_url` nor `redis.url` (the embedded default): a second private server
  is started for limits alone, with `appendfsync everysec`, its data beside the first one's.
- `redis.url` without `redis.limits_url`: limits share `redis.url`, as before.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path

from gateway.config.settings import RedisSettings
from gateway.state.connections import RedisClient, connect
from gateway.state.embedded import RedisProcess

# Every write reaches the kernel before Redis replies (the AOF is written before the reply is
# sent), so a crash of the Redis process loses nothing; only the fsync is left to once a
# second, which a crash of the machine can undo (ADR 0037).
LIMITS_APPENDFSYNC = "everysec"


@dataclass
class LimitsRedis:
    """The client limits use, and what to close with it when it is their own."""

    client: RedisClient
    process: RedisProcess | None = None
    own: bool = False  # a client of its own (closed here), not the shared one

    async def close(self) -> None:
        if self.own:
            with contextlib.suppress(Exception):
                await self.client.aclose()
        if self.process is not None:
            self.process.stop()


def open_limits_redis(settings: RedisSettings, shared: RedisClient) -> LimitsRedis:
    """The Redis for limit state under `settings` (module docstring); `shared` is the client
    of `redis.url` (or of the embedded default), used when limits have no Redis of their own."""
    if settings.limits_url is not None:
        return LimitsRedis(connect(replace(settings, url=settings.limits_url)), own=True)
    if settings.url is not None:
        return LimitsRedis(shared)
    data = Path(settings.data_dir).resolve() / "redis-limits"
    process = RedisProcess(data, appendfsync=LIMITS_APPENDFSYNC).start()
    try:
        client = connect(replace(settings, url=process.url))
    except BaseException:
        process.stop()
        raise
    return LimitsRedis(client, process, own=True)
