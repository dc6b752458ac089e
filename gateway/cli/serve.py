"""`capgate serve --config FILE`: the command line of the gateway process (gateway/process/).

The options, logging, and the choice between one process and a `--workers` supervisor; what
serving does is gateway/process/serve.py's.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from gateway.cli.args import Parser, log_to_stderr
from gateway.config.watch import SETTLE_S
from gateway.process import workers
from gateway.process.serve import serve


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="capgate serve", description="Run the gateway.")
    parser.add_argument("--config", required=True, help="config file or directory")
    parser.add_argument("--ready-file", help="write listener ports as JSON here once serving")
    parser.add_argument("--no-watch", dest="watch", action="store_false", help="disable hot reload")
    parser.add_argument(
        "--watch-interval", type=float, default=1.0, help="seconds between config polls (1)"
    )
    parser.add_argument(
        "--watch-settle",
        type=float,
        default=SETTLE_S,
        help="seconds a changed file must stay unchanged before it is loaded (0.5)",
    )
    parser.add_argument("--grace", type=float, default=5.0, help="drain time on shutdown (s)")
    parser.add_argument("--jwks-out", help="write the actor-token JWKS here (overrides config)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING, ERROR")
    parser.add_argument(
        "--workers",
        type=workers.workers_arg,
        default=workers.AUTO,
        help="processes sharing the TCP listener ports (SO_REUSEPORT), or auto (the default): "
        "one per available core where more than one is and the config allows it",
    )
    # Set by the `--workers` supervisor for each worker it starts (gateway/process/workers.py).
    parser.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--supervisor-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--worker-ports", default="", help=argparse.SUPPRESS)
    parser.add_argument("--actor-key-file", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    log_to_stderr(args.log_level)
    if args.worker_index is None:
        args.workers = workers.resolve(args.workers, args.config)
        if args.workers != 1:
            return workers.supervise(args)
    try:
        import uvloop  # noqa: PLC0415 - optional speed-up, absent on some platforms

        return uvloop.run(serve(args))
    except ImportError:
        return asyncio.run(serve(args))
