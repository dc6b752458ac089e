"""What the ApprovalAdmin commands (`capgate approvals`, `capgate grants`) share: the
connection options, accepted before or after the sub-command (`--admin`, `--token`,
`--insecure`, `--ca`, `--server-name`, `-o/--output`, `--timeout`), the channel and
credentials they make, how records and refusals print, and the exit codes.

Exit codes: 0 success, 1 the gateway refused (error printed), 2 usage, 3 transport failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from capgate.v1 import types_pb2
from gateway.cli.output import add_output, record
from gateway.cli.tls import advice

OK, REFUSED, USAGE, TRANSPORT = 0, 1, 2, 3


def connection(p: argparse.ArgumentParser, default: Callable[[Any], Any]) -> None:
    """The connection and output options, accepted before or after the sub-command."""
    p.add_argument(
        "--admin",
        default=default(os.environ.get("CAPGATE_ADMIN", "127.0.0.1:7444")),
        help="admin listener: HOST:PORT or unix:///PATH (default: $CAPGATE_ADMIN, else "
        "127.0.0.1:7444)",
    )
    p.add_argument(
        "--token", default=default(None), help="bearer JWT (default: $CAPGATE_TOKEN); never printed"
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        default=default(False),
        help="plaintext instead of TLS (loopback and unix sockets only)",
    )
    p.add_argument(
        "--ca", default=default(None), help="PEM file of the CAs trusted for the admin listener"
    )
    p.add_argument(
        "--server-name",
        default=default(None),
        help="the name the listener's certificate carries, when not the --admin host",
    )
    add_output(p, default, legacy_format=True)
    p.add_argument(
        "--timeout",
        type=float,
        default=default(10.0),
        help="seconds per unary call (default 10)",
    )


def channel(args: argparse.Namespace) -> grpc.Channel:
    if args.insecure:
        return grpc.insecure_channel(args.admin)
    roots = Path(args.ca).read_bytes() if args.ca else None
    options = [("grpc.ssl_target_name_override", args.server_name)] if args.server_name else []
    return grpc.secure_channel(
        args.admin, grpc.ssl_channel_credentials(root_certificates=roots), options=options
    )


def metadata(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    token = args.token or os.environ.get("CAPGATE_TOKEN", "")
    return (("authorization", f"Bearer {token}"),) if token else ()


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    return datetime.fromtimestamp(stamp.seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def who(actor: types_pb2.Actor) -> str:
    return f"{actor.id} ({actor.issuer})" if actor.issuer else actor.id or "-"


def print_record(message: Message, output: str, out: TextIO) -> None:
    """Protobuf JSON (field names as in the proto): a JSON line or a YAML document."""
    record(MessageToDict(message, preserving_proto_field_name=True), output, out)


def print_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Rows (the first names the columns) in columns as wide as their widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


def refused(error: types_pb2.CapabilityError) -> int:
    code = types_pb2.ErrorCode.Name(error.code).removeprefix("ERROR_CODE_")
    retry = " (retryable)" if error.retryable else ""
    sys.stderr.write(f"refused: {code}: {error.message}{retry}\n")
    return REFUSED


def transport_failure(exc: grpc.RpcError, args: argparse.Namespace) -> int:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code == grpc.StatusCode.OUT_OF_RANGE:
        sys.stderr.write("watch position no longer available: list approvals, then watch\n")
        return TRANSPORT
    name = code.name if code else "UNKNOWN"
    details = exc.details() if isinstance(exc, grpc.Call) else ""
    sys.stderr.write(f"admin call failed: {name}: {details}\n")
    if code == grpc.StatusCode.UNAUTHENTICATED and not (
        args.token or os.environ.get("CAPGATE_TOKEN")
    ):
        sys.stderr.write("hint: no credentials given: pass --token JWT or set $CAPGATE_TOKEN\n")
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = advice(
            args.admin, tls=not args.insecure, ca_file=args.ca, server_name=args.server_name
        )
        if hint:
            sys.stderr.write(f"hint: {hint}\n")
    return TRANSPORT
