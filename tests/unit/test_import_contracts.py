"""The layers of docs/architecture.md are a check, not a wish: pyproject.toml's import-linter
contracts hold for gateway/ as it is, and an import that breaks one fails `lint-imports` (what
`make lint` runs), naming the offending import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` run in `root`: its pyproject.toml, over the `gateway` package in `root`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of gateway/ and pyproject.toml in which `module` (a path below gateway/) ends
    with `line`."""
    shutil.copytree(
        ROOT / "gateway", tmp_path / "gateway", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "gateway" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


def test_the_contracts_are_the_walls_the_architecture_page_names() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    assert contracts["layers"]["type"] == "layers"
    assert contracts["layers"]["layers"][0] == "cli"
    assert contracts["layers"]["layers"][-1] == "errors | model"
    assert contracts["inbox-process"]["modules"] == ["gateway.inbox", "gateway.process"]
    assert contracts["upstream-kinds"]["type"] == "independence"
    makefile = (ROOT / "Makefile").read_text()
    assert "$(VENV)/bin/lint-imports" in makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]


def test_gateway_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken", "chain"),
    [
        pytest.param(
            "values/canonical.py",
            "from gateway.pipeline import runner  # noqa: E402",
            "gateway/ imports point down",
            "gateway.values.canonical -> gateway.pipeline.runner",
            id="values-reaches-up-into-the-pipeline",
        ),
        pytest.param(
            "state/idempotency.py",
            "from gateway.transport import server  # noqa: E402",
            "gateway/ imports point down",
            "gateway.state.idempotency -> gateway.transport.server",
            id="state-reaches-up-into-transport",
        ),
        pytest.param(
            "upstream/mcpcall.py",
            "from gateway.upstream import http  # noqa: E402",
            "the upstream kinds know nothing of each other",
            "gateway.upstream.mcpcall -> gateway.upstream.http",
            id="kind-mcp-knows-kind-http",
        ),
        pytest.param(
            "inbox/views.py",
            "from gateway.process import serve  # noqa: E402",
            "the inbox and the gateway process know nothing of each other",
            "gateway.inbox.views -> gateway.process.serve",
            id="the-inbox-knows-the-process",
        ),
    ],
)
def test_a_forbidden_import_fails_the_linter(
    tmp_path: Path, module: str, line: str, broken: str, chain: str
) -> None:
    result = _lint(_copy_with(tmp_path, module, line))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{broken}" in result.stdout
    assert any(
        row.startswith(name) and row.rstrip().endswith("BROKEN")
        for row in result.stdout.splitlines()
        for name in [broken]
    ), result.stdout
    assert chain in result.stdout, result.stdout
