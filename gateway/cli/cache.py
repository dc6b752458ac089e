"""`capgate cache purge CAPABILITY_ID` — delete a capability's result cache entries over
`CacheAdmin.PurgeCache` (docs/cache.md).

Connection as for `capgate approvals`: `--admin HOST:PORT` (default 127.0.0.1:7444, or a
unix:// address), a bearer JWT from `--token` or $CAPGATE_TOKEN, TLS unless `--insecure`. The
options go before or after the command. Prints the number of entries deleted
(`-o json|yaml`: `{capability_id, deleted}`).
Exit codes: 0 success, 2 usage, 3 transport failure or refusal (the gRPC status is printed).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc
from gateway.cli.admin import channel as _channel
from gateway.cli.admin import connection as _connection
from gateway.cli.admin import metadata as _metadata
from gateway.cli.admin import transport_failure as _transport_failure
from gateway.cli.args import Parser, everywhere
from gateway.cli.output import record

_OK, _USAGE = 0, 2


def _parser() -> Parser:
    p = Parser(
        prog="capgate cache",
        # The first paragraph whole: its first line alone stopped mid-sentence ("... over").
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="Options of the connection may come before or after the command.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    purge = sub.add_parser("purge", help="delete every cached entry of one capability")
    purge.add_argument("capability", help="capability id")
    everywhere(p, [purge], _connection)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with _channel(args) as channel:
            answer = admin_pb2_grpc.CacheAdminStub(channel).PurgeCache(
                admin_pb2.PurgeCacheRequest(capability_id=args.capability),
                metadata=_metadata(args),
                timeout=args.timeout,
            )
    except grpc.RpcError as exc:
        return _transport_failure(exc, args)
    except OSError as exc:
        sys.stderr.write(f"capgate cache: {exc.strerror or exc}\n")
        return _USAGE
    if args.output == "table":
        entries = "entry" if answer.deleted == 1 else "entries"
        print(f"purged {answer.deleted} {entries} of {args.capability}")
    else:
        record(
            {"capability_id": args.capability, "deleted": answer.deleted}, args.output, sys.stdout
        )
    return _OK
