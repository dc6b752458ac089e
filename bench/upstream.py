"""The benchmark upstream: a minimal JSON-native `capgate.v1.Procedure` server.

Every scenario (direct, bare proxy, governed) ends here, so its cost is common to all of them;
it does what a real JSON-native procedure must do and nothing more: parse the input JSON, build
a small reply, serialize it. Health is served so that the harness can wait for readiness.
It also serves the governance hook of the one-pre-hook row (`capgate.v1.Hook`, docs/hooks.md):
a PreInvoke that reads the input and answers one context attribute, as a standing lookup would.

    python -m bench.upstream --address 127.0.0.1:0 --ready-file F
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import grpc
import orjson
import uvloop
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from capgate.v1 import hook_pb2, hook_pb2_grpc, procedure_pb2, procedure_pb2_grpc


def reply_for(capability_id: str, value: Any) -> dict[str, Any]:
    """The procedure's answer: the fields the bench capabilities' output schemas require."""
    order_id = value.get("order_id", "") if isinstance(value, dict) else ""
    return {
        "refund_id": f"rf-{order_id}",
        "order_id": order_id,
        "amount": value.get("amount", 0) if isinstance(value, dict) else 0,
        "status": "REFUND_STATUS_SUCCEEDED",
        "card_last4": "4242",
        "capability": capability_id,
    }


class Procedure(procedure_pb2_grpc.ProcedureServicer):
    async def Invoke(
        self, request: procedure_pb2.ProcedureInvokeRequest, context: Any
    ) -> procedure_pb2.ProcedureInvokeResponse:
        try:
            value = orjson.loads(request.input_json or "{}")
        except orjson.JSONDecodeError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "input is not JSON")
        output = orjson.dumps(reply_for(request.capability_id, value)).decode()
        return procedure_pb2.ProcedureInvokeResponse(output_json=output)


class Hook(hook_pb2_grpc.HookServicer):
    """The bench pre-hook: parse the input, answer `in_arrears` (what a lookup would)."""

    async def PreInvoke(
        self, request: hook_pb2.PreInvokeRequest, context: Any
    ) -> hook_pb2.PreInvokeResponse:
        value = orjson.loads(request.input_json or "{}")
        late = isinstance(value, dict) and str(value.get("order_id", "")).endswith("-late")
        return hook_pb2.PreInvokeResponse(context_json=orjson.dumps({"in_arrears": late}).decode())


async def serve(address: str) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    procedure_pb2_grpc.add_ProcedureServicer_to_server(Procedure(), server)
    hook_pb2_grpc.add_HookServicer_to_server(Hook(), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port(address)
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    return server, port


async def _main(args: argparse.Namespace) -> None:
    server, port = await serve(args.address)
    if args.ready_file:
        await asyncio.to_thread(Path(args.ready_file).write_text, json.dumps({"port": port}))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:0")
    parser.add_argument("--ready-file", help="write {'port': N} here once serving")
    args = parser.parse_args()
    uvloop.run(_main(args))


if __name__ == "__main__":
    main()
