"""Generate the Python protobuf/gRPC modules of `proto/` into `capgate/` (committed).

`--check` regenerates into a temporary directory and fails when the committed files differ,
so stale generated code never lands.
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
OUT = ROOT / "capgate"


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
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for pkg in [out / "capgate", out / "capgate" / "v1"]:
        (pkg / "__init__.py").write_text(
            '"""Generated from proto/ by scripts/gen_python.py; do not edit."""\n'
        )


def _tree(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="fail when committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _generate(Path(tmp))
        fresh = Path(tmp) / "capgate"
        if args.check:
            new, old = _tree(fresh), _tree(OUT)
            stale = sorted(
                k
                for k in new.keys() | old.keys()
                if k not in new or k not in old or not filecmp.cmp(new[k], old[k], shallow=False)
            )
            if stale:
                print(
                    "generated Python is stale; run `make gen`:",
                    *stale,
                    sep="\n  ",
                    file=sys.stderr,
                )
                return 1
            return 0
        if OUT.exists():
            shutil.rmtree(OUT)
        shutil.copytree(fresh, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
