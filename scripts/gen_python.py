"""Generate the Python protobuf/gRPC modules of `proto/` (committed), twice:

- `capgate/v1/` — the gateway's (the top-level `capgate` package of this repository);
- `clients/python/capgate_client/_gen/capgate/v1/` — the Python client's own copy, so that
  `pip install clients/python` needs grpcio and protobuf and not the gateway. Its imports are
  rewritten to `capgate_client._gen.capgate.v1`; the descriptors are byte-identical, so both
  copies can be imported into one process (the default pool accepts an identical file twice).

`--check` regenerates into a temporary directory and fails when a committed file differs, so
stale generated code never lands.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
GATEWAY = ROOT / "capgate"
CLIENT = ROOT / "clients" / "python" / "capgate_client" / "_gen"
CLIENT_PACKAGE = "capgate_client._gen.capgate.v1"
HEADER = '"""Generated from proto/ by scripts/gen_python.py; do not edit."""\n'


def _generate(out: Path) -> None:
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *files,
    ]
    out.mkdir(parents=True, exist_ok=True)
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for pkg in [out / "capgate", out / "capgate" / "v1"]:
        (pkg / "__init__.py").write_text(HEADER)


def _client_copy(gateway: Path, out: Path) -> None:
    """The gateway's tree under `_gen/`, importing its siblings from the client package."""
    shutil.copytree(gateway, out / "capgate")
    (out / "__init__.py").write_text(HEADER)
    for path in (out / "capgate" / "v1").glob("*.py*"):
        text = path.read_text()
        path.write_text(text.replace("from capgate.v1 import", f"from {CLIENT_PACKAGE} import"))


def _tree(root: Path) -> dict[str, Path]:
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _stale(fresh: Path, committed: Path) -> list[str]:
    new, old = _tree(fresh), _tree(committed)
    return sorted(
        str(committed.relative_to(ROOT) / k)
        for k in new.keys() | old.keys()
        if k not in new or k not in old or not filecmp.cmp(new[k], old[k], shallow=False)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _generate(Path(tmp) / "protoc")
        pairs = [(Path(tmp) / "protoc" / "capgate", GATEWAY), (Path(tmp) / "client", CLIENT)]
        _client_copy(pairs[0][0], pairs[1][0])
        if args.check:
            stale = [name for fresh, committed in pairs for name in _stale(fresh, committed)]
            if stale:
                print(
                    "generated Python is stale; run `make gen`:",
                    *stale,
                    sep="\n  ",
                    file=sys.stderr,
                )
                return 1
            return 0
        for fresh, committed in pairs:
            if committed.exists():
                shutil.rmtree(committed)
            shutil.copytree(fresh, committed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
