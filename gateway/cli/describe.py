"""`capgate describe [CAPABILITY ...]` — the capabilities this caller may see, over
`CapabilityGateway.Describe` (connection, credential and output: gateway/cli/caller.py).

The table lists id, side effect, risk, whether approval is required and the description; with
one capability named, its input schema too. json and yaml print the whole answer."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import orjson

from capgate.v1 import gateway_pb2, gateway_pb2_grpc
from gateway.cli import caller
from gateway.cli.args import Parser


def _parser() -> Parser:
    p = caller.parser("capgate describe", __doc__.split("\n\n")[0])
    p.add_argument("capabilities", nargs="*", metavar="CAPABILITY", help="only these ids")
    return caller.single(p)


def _describe(stub: gateway_pb2_grpc.CapabilityGatewayStub, args: argparse.Namespace) -> int:
    reply = stub.Describe(
        gateway_pb2.DescribeRequest(capability_ids=args.capabilities),
        metadata=caller.metadata(args),
        timeout=args.timeout,
    )
    if args.output != "table":
        caller.dump(caller.as_dict(reply), args.output)
        return caller.OK
    rows = [("ID", "SIDE EFFECT", "RISK", "APPROVAL", "DESCRIPTION")]
    rows += [
        (
            c.id,
            c.side_effect or "-",
            c.risk or "-",
            "required" if c.requires_approval else "-",
            c.description.splitlines()[0] if c.description else "",
        )
        for c in reply.capabilities
    ]
    caller.table(rows)
    if len(args.capabilities) == 1 and len(reply.capabilities) == 1:
        schema = reply.capabilities[0].input_schema_json
        if schema:
            print("\ninput schema:\n" + caller.pretty(orjson.loads(schema)))
    return caller.OK


def main(argv: Sequence[str] | None = None) -> int:
    args = caller.parse(_parser(), argv)
    if isinstance(args, int):
        return args
    return caller.run("capgate describe", args, lambda stub: _describe(stub, args))
