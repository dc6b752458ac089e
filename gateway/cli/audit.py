"""`capgate audit` — read the audit stream in Redis, and recompute an input HMAC.

    capgate audit query --config gateway.yaml --execution-id 3f2a... --since 1h
    capgate audit query --redis-url redis://127.0.0.1:6379/0 --capability orders.refund \\
        --actor alice --since 2025-01-01T00:00:00Z --until 2025-01-02T00:00:00Z
    capgate audit tail  --config gateway.yaml --group siem --consumer siem-1
    capgate audit hmac  --config gateway.yaml validated-input.json

Events print as JSON lines (`-o json`, the default), YAML documents (`-o yaml`) or a table of
their time, event, capability, actor, outcome and execution id (`-o table`). `--since` and
`--until` take an ISO 8601 time or a duration ago (`15m`, `2h`). `hmac` prints the
`input_hmac` an event would carry for a validated input (defaults applied), with the key of
`audit.hmac_key` or of the variable named by `--key-env`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
from redis.exceptions import RedisError

from gateway.audit import stream
from gateway.audit.events import InputHasher
from gateway.cli.args import Parser, everywhere, redact
from gateway.cli.output import add_output, record
from gateway.cli.tls import redis_advice
from gateway.config.durations import parse_duration
from gateway.config.loader import ConfigError, load_settings
from gateway.config.settings import RedisSettings
from gateway.state.connections import connect

# `-o table`: a stream has no widest cell to wait for, so the widths are fixed.
_COLUMNS = ("TIME", "EVENT", "CAPABILITY", "ACTOR", "OUTCOME", "EXECUTION")
_FIELDS = ("time", "event", "capability_id", "actor_id", "outcome", "execution_id")
_EVENT_ROW = "{:<29}  {:<24}  {:<20}  {:<12}  {:<18}  {}\n"


class UsageError(Exception):
    """A bad argument; printed without a traceback."""


def _when(text: str | None, now: float) -> float | None:
    if not text:
        return None
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time or duration: {text!r}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _stream_options(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """Where the stream is: accepted before or after `query`/`tail`."""
    p.add_argument(
        "--config",
        default=default(None),
        help="gateway config: its redis.url and audit.redis_stream (hmac: its audit.hmac_key)",
    )
    p.add_argument("--redis-url", default=default(None), help="Redis URL (overrides the config's)")
    p.add_argument(
        "--stream",
        default=default(None),
        help="stream key (default: the config's, else capgate:audit)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="capgate audit",
        description=__doc__.split("\n")[0],
        epilog="--config, --redis-url and --stream may come before or after the command.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    readers = []
    for name, about in (
        ("query", "print matching events already in the stream"),
        ("tail", "print matching events as they are written"),
    ):
        p = sub.add_parser(name, help=about)
        readers.append(p)
        p.add_argument("--execution-id", default="", help="one execution's events")
        p.add_argument("--capability", default="", help="capability id")
        p.add_argument("--actor", default="", help="actor id (who acted or who asked)")
        p.add_argument("--approval-id", default="", help="one approval's events")
        p.add_argument("--event", default="", help="event name, e.g. capability.denied")
        p.add_argument("--since", help="ISO 8601 time or a duration ago (15m, 2h)")
        p.add_argument("--until", help="ISO 8601 time or a duration ago")
        p.add_argument("--limit", type=int, default=0, help="stop after N events (0: no limit)")
        add_output(p, initial="json")
        if name == "tail":
            p.add_argument("--group", default="", help="read as this consumer group")
            p.add_argument("--consumer", default="", help="consumer name (default: host-pid)")
            p.add_argument("--idle-timeout", type=float, help="stop after N s with nothing new")
    h = sub.add_parser("hmac", help="the input_hmac of a validated input (JSON file or -)")
    h.add_argument("input", nargs="?", default="-", help="validated input JSON (default: stdin)")
    h.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        help="gateway config: its audit.hmac_key and hmac_key_id",
    )
    h.add_argument("--key-env", help="environment variable holding the key")
    h.add_argument("--key-id", help="key id to print (default: the config's, else k1)")
    everywhere(parser, readers, _stream_options)
    return parser


def _connection(args: argparse.Namespace) -> tuple[str, str]:
    url, key = args.redis_url, args.stream
    if args.config:
        settings = load_settings(args.config)
        url = url or settings.redis.url
        key = key or settings.audit.redis_stream
    if not url:
        raise UsageError("no Redis URL: pass --redis-url (the embedded Redis is not reachable)")
    return url, key or "capgate:audit"


async def _read(args: argparse.Namespace, url: str, key: str, out: IO[str]) -> int:
    now = time.time()
    flt = stream.Filter(
        execution_id=args.execution_id,
        capability=args.capability,
        actor=args.actor,
        approval_id=args.approval_id,
        event=args.event,
        since=_when(args.since, now),
        until=_when(args.until, now),
    )
    redis = connect(replace(RedisSettings(), url=url))
    printed = 0
    try:
        if args.command == "query":
            events = stream.query(redis, key, flt)
        else:
            consumer = args.consumer or f"{os.uname().nodename}-{os.getpid()}"
            events = stream.tail(
                redis,
                key,
                flt,
                group=args.group,
                consumer=consumer,
                idle_timeout_s=args.idle_timeout,
            )
        if args.output == "table":
            out.write(_EVENT_ROW.format(*_COLUMNS))
        async for event in events:
            if args.output == "table":
                out.write(_EVENT_ROW.format(*(str(event.get(c) or "-") for c in _FIELDS)))
            else:
                record(event, args.output, out)
            out.flush()
            printed += 1
            if args.limit and printed >= args.limit:
                await events.aclose()
                break
    finally:
        await redis.aclose()
    return 0


def _hmac(args: argparse.Namespace, out: IO[str]) -> int:
    key, key_id = "", args.key_id
    if args.config:
        audit = load_settings(args.config).audit
        key, key_id = audit.hmac_key, key_id or audit.hmac_key_id
    if args.key_env:
        key = os.environ.get(args.key_env, "")
    if not key:
        raise UsageError("no key: pass --config with audit.hmac_key, or --key-env NAME")
    try:
        raw = sys.stdin.buffer.read() if args.input == "-" else Path(args.input).read_bytes()
    except OSError as exc:
        raise UsageError(f"{args.input}: {exc.strerror or exc}") from None
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise UsageError("the input is not JSON") from None
    hasher = InputHasher(key.encode(), key_id or "k1")
    out.write(
        orjson.dumps(
            {"input_hmac": hasher.digest(value), "input_hmac_key_id": hasher.key_id}
        ).decode()
        + "\n"
    )
    return 0


def run(argv: Sequence[str], out: IO[str]) -> int:
    args = _parser().parse_args(list(argv))
    url = ""
    try:
        if args.command == "hmac":
            return _hmac(args, out)
        url, key = _connection(args)
        return asyncio.run(_read(args, url, key, out))
    except (UsageError, ConfigError) as exc:
        print(f"capgate audit: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the entry point ends quietly
    except (RedisError, OSError) as exc:
        print(
            f"capgate audit: Redis at {redact(url)} is not reachable ({type(exc).__name__})",
            file=sys.stderr,
        )
        hint = redis_advice(url) if url else None
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str]) -> int:
    return run(argv, sys.stdout)
