"""`capgate config check FILE` and `capgate config schema`.

`check` prints `ok: N listeners, M capabilities, revision R` (exit 0) or every problem as
`file:line: path: message` (exit 1); warnings (e.g. SI-11 retries that cannot apply) go to
stderr. `schema` prints the published JSON Schema.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from gateway.config.loader import load_settings
from gateway.config.problems import ConfigError
from gateway.config.schema import config_schema


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capgate config", description="Gateway config tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate a config file or directory")
    check.add_argument("file", help="config YAML file, or a directory of *.yaml files")
    commands.add_parser("schema", help="print the config JSON Schema")
    return parser


def main(argv: Sequence[str]) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse exits on usage errors and --help
        return int(exc.code or 0)
    if args.command == "schema":
        print(json.dumps(config_schema(), indent=2))
        return 0
    return _check(args.file)


def _check(file: str) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    logger = logging.getLogger("gateway.config")
    logger.addHandler(handler)
    try:
        settings = load_settings(file)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        print(f"{len(exc.problems)} problem(s)", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(handler)
    print(
        f"ok: {len(settings.listeners)} listeners, {len(settings.capabilities)} capabilities, "
        f"revision {settings.revision}"
    )
    return 0
