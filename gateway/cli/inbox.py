"""`capgate inbox` — serve the approver web inbox over a gateway's ApprovalAdmin.

    capgate inbox --config inbox.yaml [--admin HOST:PORT] [--listen 127.0.0.1:8080]
                  [--base-url URL] [--ready-file FILE]

The config file says how the inbox authenticates to the admin listener (its own JWT and/or an
mTLS certificate, allow-listed there with `on_behalf_of`) and how approvers sign in (bearer JWTs
and/or a proxy's signed identity assertion). Reference: docs/inbox.md.
Exit codes: 0 stopped cleanly, 2 invalid config or usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.cli.args import Parser, log_to_stderr
from gateway.config.problems import ConfigError
from gateway.inbox.config import load_inbox_settings
from gateway.inbox.server import start_inbox
from gateway.inbox.settings import InboxSettings

log = logging.getLogger("capgate.inbox")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="capgate inbox", description="Serve the approver web inbox.")
    p.add_argument("--config", required=True, help="inbox config file (YAML)")
    p.add_argument("--admin", help="admin listener address (overrides admin.address)")
    p.add_argument("--listen", help="host:port to serve on (default 127.0.0.1:8080)")
    p.add_argument("--base-url", help="public URL of the inbox (https => Secure cookies)")
    p.add_argument("--ready-file", help='write {"url": ...} here once serving')
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING, ERROR")
    return p


def _write_ready(path: str, url: str) -> None:
    Path(path).write_text(json.dumps({"url": url}))


def _stopped(_signal: int, _frame: object) -> None:
    """Handler uvicorn hands a caught SIGINT/SIGTERM back to after draining: exit normally."""


async def _serve(settings: InboxSettings, ready_file: str | None) -> int:
    # uvicorn traps SIGINT/SIGTERM while serving, drains, then re-raises the signal to the
    # handlers it found; these make that a clean exit (status 0) instead of death by signal.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stopped)
    running = await start_inbox(settings, access_log=True)
    if ready_file:
        _write_ready(ready_file, running.url)
    log.info("capgate inbox serving on %s (admin %s)", running.url, settings.admin.address)
    try:
        await running.task  # uvicorn stops on SIGINT / SIGTERM
    finally:
        await running.stop_embedded()  # a private session store goes with us
    return 0


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    log_to_stderr(args.log_level)
    try:
        settings = load_inbox_settings(
            args.config, admin_address=args.admin, listen=args.listen, base_url=args.base_url
        )
    except ConfigError as exc:
        problems = "\n".join(f"  {p}" for p in exc.problems)
        print(f"capgate inbox: invalid config, not starting:\n{problems}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(settings, args.ready_file))
