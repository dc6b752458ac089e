"""Regenerate the example upstream's Python modules and descriptor set from `orders.proto`.

    python -m examples.orders.gen          # rewrite orders_pb2*.py and orders.pb
    python -m examples.orders.gen --check  # exit 1 when the committed files are stale

The proto is compiled from the repository root so that the generated gRPC module imports
`examples.orders.orders_pb2` (a package path) and the descriptor names the file
`examples/orders/orders.proto`, which is also what server reflection reports.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROTO = "examples/orders/orders.proto"
OUTPUTS = ("orders_pb2.py", "orders_pb2.pyi", "orders_pb2_grpc.py", "orders.pb")


def generate(out: Path) -> dict[str, Path]:
    """Run protoc into `out`; return the generated files by name."""
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        f"--descriptor_set_out={out / 'orders.pb'}",
        "--include_imports",
        PROTO,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = out / "examples" / "orders"
    files = {name: generated / name for name in OUTPUTS[:3]}
    files["orders.pb"] = out / "orders.pb"
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when committed files are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(Path(tmp))
        if args.check:
            stale = [
                name
                for name, path in files.items()
                if not (HERE / name).exists() or (HERE / name).read_bytes() != path.read_bytes()
            ]
            if stale:
                print("examples/orders generated files are stale:", *stale, file=sys.stderr)
                print("run: python -m examples.orders.gen", file=sys.stderr)
                return 1
            return 0
        for name, path in files.items():
            shutil.copyfile(path, HERE / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
