"""`capgate approval status APPROVAL_ID` — the state of an approval a caller asked for
(`CapabilityGateway.GetApproval`; approvers use `capgate approvals`). Connection, credential and
output: gateway/cli/caller.py. Exit 0 when answered, 5 when the gateway refused (not found, not
yours), 3 when there was no answer."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.cli import caller
from gateway.cli.args import Parser, everywhere


def _parser() -> Parser:
    p = caller.parser("capgate approval", __doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    status = sub.add_parser("status", help="the status of one approval you asked for")
    status.add_argument("approval", metavar="APPROVAL_ID")
    everywhere(p, [status], caller.connection)
    return p


def _time(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    return datetime.fromtimestamp(stamp.seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _status(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int:
    reply = stub.GetApproval(
        gateway_pb2.GetApprovalRequest(approval_id=args.approval),
        metadata=caller.metadata(args),
        timeout=args.timeout,
    )
    code = caller.FAILED if reply.HasField("error") else caller.OK
    if args.output != "table":
        caller.dump(caller.as_dict(reply), args.output)
        return code
    if reply.HasField("error"):
        caller.fields(caller.error_rows(reply.error))
        return code
    a = reply.approval
    caller.fields(
        [
            ("approval", a.id),
            ("capability", a.capability_id),
            ("status", caller.enum_name(types_pb2.ApprovalStatus, a.status, "APPROVAL_STATUS_")),
            ("reasons", "; ".join(a.reasons) or "-"),
            ("created", _time(a.created_at)),
            ("expires", _time(a.expires_at)),
            ("decided", _time(a.decided_at)),
            ("decided by", a.decided_by.id or "-"),
            ("note", a.decision_note or "-"),
            ("input hash", a.input_hash),
        ]
    )
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = caller.parse(_parser(), argv)
    if isinstance(args, int):
        return args
    return caller.run("capgate approval", args, lambda stub: _status(stub, args))
