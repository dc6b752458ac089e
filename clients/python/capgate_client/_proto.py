"""The generated stubs: the client's own copy under `capgate_client._gen` (scripts/gen_python.py
writes it from `proto/` next to the gateway's `capgate.v1`; `make gen-check` keeps both fresh),
so the client needs grpcio and protobuf, not the gateway."""

from __future__ import annotations

from capgate_client._gen.capgate.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
    types_pb2,
)

__all__ = ["admin_pb2", "admin_pb2_grpc", "gateway_pb2", "gateway_pb2_grpc", "types_pb2"]
