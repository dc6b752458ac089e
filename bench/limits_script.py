"""`python -m bench.limits_script`: what the limit script costs against a real Redis, by its
`appendfsync` setting, beside a PING on the same connection (docs/performance.md, "Two limits").

Two limits (a rate and a budget, one key each) are checked and spent in one script call
(`RedisLimiter.check`), `CALLS` times sequentially, alternating with a PING; medians in µs.
Writes bench/out/limits_script.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config.limitspec import BudgetSpec, ExprSite, LimitSpec, RateSpec
from gateway.config.settings import RedisSettings
from gateway.state.connections import connect
from gateway.state.embedded import free_port, select, spawn
from gateway.state.limits.store import Charge, RedisLimiter

OUT = Path(__file__).parent / "out" / "limits_script.json"
CALLS = 2000
SITE = ExprSite("bench", 1, 1)
RATE = LimitSpec("rate", "actor.id", SITE, rate=RateSpec(1_000_000, 1.0, 1_000_000))
BUDGET = LimitSpec("budget", "actor.id", SITE, budget=BudgetSpec("1", SITE, 1e15, 86400.0))
MODES = {"always": ["--appendonly", "yes", "--appendfsync", "always"]}
MODES["everysec"] = ["--appendonly", "yes", "--appendfsync", "everysec"]
MODES["no AOF"] = ["--appendonly", "no"]


async def _measure(flags: list[str]) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="cg-lim-"))
    port = free_port()
    argv = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(home), *flags]
    process = spawn(select(), argv, home)
    redis = connect(RedisSettings(url=f"redis://127.0.0.1:{port}/0", key_prefix="bench"))
    try:
        for _ in range(100):  # until it answers, then warm: the script loaded
            try:
                await redis.ping()
                break
            except Exception:  # not up yet
                await asyncio.sleep(0.05)
        limiter = RedisLimiter(redis, prefix="bench")
        charges = [Charge(RATE, "alice"), Charge(BUDGET, "alice", 1.0)]
        for _ in range(50):
            await limiter.check(charges, now=time.time())
        script, ping = [], []
        for _ in range(CALLS):
            started = time.perf_counter()
            await limiter.check(charges, now=time.time())
            script.append(time.perf_counter() - started)
            started = time.perf_counter()
            await redis.ping()
            ping.append(time.perf_counter() - started)
    finally:
        await redis.aclose()
        process.terminate()
        process.wait(10)
    return {
        "script_us": round(statistics.median(script) * 1e6),
        "ping_us": round(statistics.median(ping) * 1e6),
    }


def main() -> None:
    results = {mode: asyncio.run(_measure(flags)) for mode, flags in MODES.items()}
    for mode, figures in results.items():
        print(f"{mode:<9} script {figures['script_us']:>5} µs   PING {figures['ping_us']:>5} µs")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
