"""The README's claims that a test can hold it to: its policy commands run as printed, with the
sample files they name, and every file it links to exists."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _commands(prefix: str) -> list[list[str]]:
    lines = [line.split("#")[0].strip() for line in README.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(prefix)]


def test_the_readme_links_only_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)\)", README)
    local = [t for t in targets if "://" not in t]
    assert local, "no links found: the pattern is wrong"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


def test_the_readme_policy_commands_run_as_printed(tmp_path: Path) -> None:
    commands = _commands(".venv/bin/capgate policy ")
    assert {argv[2] for argv in commands} == {"check", "test", "explain"}
    environ = {
        **os.environ,  # what `examples/config/gateway.yaml` substitutes (docs: Configure)
        "CAPGATE_DEMO_JWT_SECRET": "readme-" + "x" * 32,
        "CAPGATE_AUDIT_HMAC_KEY": "readme-" + "y" * 32,
        "CAPGATE_RUN_DIR": str(tmp_path),
        "CAPGATE_ORDERS_ADDR": "127.0.0.1:50051",
    }
    for argv in commands:
        # The README's files are relative to the clone; only the JUnit report goes elsewhere.
        args = [str(tmp_path / "out.xml") if a == "out.xml" else a for a in argv[1:]]
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli.main", *args],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
        if argv[2] == "explain":
            result = json.loads(done.stdout)
            assert result["decision"] == "require-approval"
            assert result["approval"]["roles"] == ["manager"]
        if argv[2] == "test":
            assert (tmp_path / "out.xml").exists()
