"""The generated stubs, from the repository's top-level `capgate` package (`capgate.v1`).

capgate_client vendors nothing: the stubs are generated once in the repository, with a staleness
check (`scripts/gen_python.py --check`), and installed with it (`pip install -e <repo>`).
"""

from __future__ import annotations

try:
    from capgate.v1 import (
        admin_pb2,
        admin_pb2_grpc,
        gateway_pb2,
        gateway_pb2_grpc,
        types_pb2,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "capgate_client needs the generated stubs of the capgate repository (package "
        "`capgate.v1`): run `pip install -e /path/to/capgate` in this environment first"
    ) from exc

__all__ = ["admin_pb2", "admin_pb2_grpc", "gateway_pb2", "gateway_pb2_grpc", "types_pb2"]
