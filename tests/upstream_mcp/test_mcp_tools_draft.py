"""`capgate config mcp-tools`: capabilities drafted from the tools the SDK's MCP server lists,
through the config's own upstream settings; annotations only suggest the side effect, every
draft is hidden (expose: {}), and the draft loads and serves once exposed."""

from __future__ import annotations

import asyncio
import io
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

import yaml

from examples.mcp_upstream.server import serve
from gateway.cli.config import main as config_main
from gateway.config.loader import load_settings

CONFIG = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  desk: {kind: mcp, address: "ADDRESS"}
"""


async def test_drafts_follow_the_annotations_and_stay_hidden() -> None:
    desk = await serve()
    config = Path(tempfile.mkdtemp(prefix="cg-draft-")) / "gateway.yaml"
    config.write_text(CONFIG.replace("ADDRESS", desk.address))
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            # main runs its own event loop: give it a thread, this one serves the desk.
            code = await asyncio.to_thread(
                config_main, ["mcp-tools", str(config), "--upstream", "desk"]
            )
    finally:
        await desk.stop()
    assert code == 0
    drafts = yaml.safe_load(out.getvalue())["capabilities"]
    assert [(d["id"], d["tool"], d["side_effect"], d["expose"]) for d in drafts] == [
        ("desk.search_tickets", "search_tickets", "read", {}),  # readOnlyHint
        ("desk.close_ticket", "close_ticket", "destructive", {}),  # destructiveHint
        ("desk.issue_credit", "issue_credit", "destructive", {}),  # no hints: MCP's default
        ("desk.broken", "broken", "destructive", {}),
        ("desk.echo", "echo", "destructive", {}),
    ]
    config.write_text(config.read_text() + yaml.safe_dump({"capabilities": drafts}))
    assert len(load_settings(config, environ={}).capabilities) == 5


def test_an_unknown_upstream_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG.replace("ADDRESS", "127.0.0.1:9"))
    assert config_main(["mcp-tools", str(config), "--upstream", "nope"]) == 1
    assert config_main(["mcp-tools", str(config), "--upstream", "desk"]) == 1  # nothing listens
