"""`capgate resume APPROVAL_ID [--wait]` — run a call that waited for approval, once it is
approved (`CapabilityGateway.Resume`), and print its envelope as `capgate invoke` does
(connection, credential and output: gateway/cli/caller.py). Only its requester may resume it;
a repeat answers the recorded result. With `--wait`, first wait (`WaitApproval`, as long as it
takes; Ctrl-C stops) until an approver decided it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from google.protobuf.duration_pb2 import Duration

from capgate.v1 import gateway_pb2, gateway_pb2_grpc, types_pb2
from gateway.cli import caller
from gateway.cli.args import Parser

# Each WaitApproval is bounded by the gateway (30 s by default): ask again until it is decided.
_WAIT_S = 25


def _parser() -> Parser:
    p = caller.parser("capgate resume", __doc__.split("\n\n")[0])
    p.add_argument("approval", metavar="APPROVAL_ID", help="the id `capgate invoke` printed")
    p.add_argument(
        "--wait", action="store_true", help="wait until an approver decided it, then resume"
    )
    return caller.single(p)


def _wait(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int | None:
    """None once decided; the exit code when the gateway refused to say."""
    sys.stderr.write(f"waiting for a decision on {args.approval} (Ctrl-C stops)\n")
    while True:
        reply = stub.WaitApproval(
            gateway_pb2.WaitApprovalRequest(
                approval_id=args.approval, timeout=Duration(seconds=_WAIT_S)
            ),
            metadata=caller.metadata(args),
            timeout=_WAIT_S + args.timeout,
        )
        if reply.HasField("error"):
            caller.fields(caller.error_rows(reply.error))
            return caller.FAILED
        if reply.approval.status != types_pb2.APPROVAL_STATUS_PENDING:
            return None


def _resume(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int:
    if args.wait and (refused := _wait(stub, args)) is not None:
        return refused
    reply = stub.Resume(
        gateway_pb2.ResumeRequest(approval_id=args.approval),
        metadata=caller.metadata(args),
        timeout=args.timeout,
    )
    return caller.print_result(reply, args.output)


def main(argv: Sequence[str] | None = None) -> int:
    args = caller.parse(_parser(), argv)
    if isinstance(args, int):
        return args
    return caller.run("capgate resume", args, lambda stub: _resume(stub, args))
