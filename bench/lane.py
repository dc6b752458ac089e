"""`python -m bench.lane`: what one Redis command costs the gateway's process through the lean
lane (gateway/state/lane.py, ADR 0042) and through redis-py, on the same client and server
(docs/performance.md, "Issue 29").

A real Redis (`appendfsync everysec`) on loopback; uvloop, as `capgate serve` runs; for each
command, `CALLS` sequential calls after a warm-up, in `ROUNDS` rounds that alternate the two
paths. CPU per command is the process's CPU time (every thread), wall the elapsed time; the
medians over the rounds, in µs. Writes bench/out/lane.json.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

from gateway.config.settings import RedisSettings
from gateway.state.connections import GatewayRedis, connect, hot_get, hot_script
from gateway.state.embedded import RedisProcess

OUT = Path(__file__).parent / "out" / "lane.json"
CALLS = 2000
ROUNDS = 5
WARMUP = 200
# The shape of a limit check: a few keys, a dozen arguments, a short array back.
SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]) return {ARGV[2], ARGV[3], 1}"


async def _time(command: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    for _ in range(WARMUP):
        await command()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(CALLS):
        await command()
    return (
        (time.process_time() - cpu) / CALLS * 1e6,
        (time.perf_counter() - wall) / CALLS * 1e6,
    )


async def _measure() -> dict[str, dict[str, float]]:
    process = RedisProcess(Path(tempfile.mkdtemp(prefix="cg-lane-")), appendfsync="everysec")
    process.start()
    redis = connect(RedisSettings(url=process.url))
    assert isinstance(redis, GatewayRedis) and redis.lane is not None
    try:
        await redis.set("bench:get", b"x" * 300)
        args = [b"y" * 300, "1.5", "42"]
        lane_script = hot_script(redis, SCRIPT)
        py_script = redis.register_script(SCRIPT)
        lane_get = hot_get(redis)
        paths: dict[str, Callable[[], Awaitable[Any]]] = {
            "GET, lane": lambda: lane_get("bench:get"),
            "GET, redis-py": lambda: redis.get("bench:get"),
            "script, lane": lambda: lane_script(keys=["bench:s"], args=args),
            "script, redis-py": lambda: py_script(keys=["bench:s"], args=args),
        }
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for _ in range(ROUNDS):
            for name, command in paths.items():
                samples[name].append(await _time(command))
        return {
            name: {
                "cpu_us": round(statistics.median(c for c, _ in got), 1),
                "wall_us": round(statistics.median(w for _, w in got), 1),
            }
            for name, got in samples.items()
        }
    finally:
        await redis.aclose()
        process.stop()


def main() -> None:
    result = uvloop.run(_measure())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'command':18} {'CPU µs':>8} {'wall µs':>8}")
    for name, row in result.items():
        print(f"{name:18} {row['cpu_us']:8.1f} {row['wall_us']:8.1f}")


if __name__ == "__main__":
    main()
