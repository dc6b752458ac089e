"""`kind: mcp` config problems at file:line (the loader `capgate config check` and serve run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_settings

BASE = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  desk: {kind: mcp, address: "127.0.0.1:8080"}
  rpc: {kind: procedure, address: "127.0.0.1:8081", mcp: {path: /mcp}}
  sock: {kind: mcp, address: "unix:///tmp/x.sock"}
capabilities:
  - id: x.one
    description: d
    upstream: UPSTREAM
    side_effect: read
    risk: low
    EXTRA
"""


def _problems(tmp_path: Path, upstream: str, extra: str) -> set[tuple[str, int, str]]:
    path = tmp_path / "gateway.yaml"
    path.write_text(BASE.replace("UPSTREAM", upstream).replace("EXTRA", extra))
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    return {(p.path_in_file, p.line, p.message) for p in info.value.problems}


def test_mcp_config_problems_are_located(tmp_path: Path) -> None:
    found = _problems(tmp_path, "desk", "method: /a.B/C")
    assert ("upstreams.rpc.mcp", 6, "only used with kind: mcp") in found
    message = (
        "a kind mcp upstream's address is host:port (a name, IPv4 or [IPv6] address and a port "
        "1-65535; no scheme, path, user, query or spaces)"
    )
    assert ("upstreams.sock.address", 7, message) in found
    assert ("capabilities[0].method", 14, "mcp upstreams take tool instead") in found
    assert ("capabilities[0]", 9, "tool is required for an mcp upstream") in found


def test_tool_on_another_kind_of_upstream_is_refused(tmp_path: Path) -> None:
    found = _problems(tmp_path, "rpc", "tool: search")
    assert ("capabilities[0].tool", 14, "only used with an upstream of kind: mcp") in found


def test_an_oauth_token_url_over_http_must_be_loopback(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    oauth = "{token_url: 'http://idp.example/token', client_id: c, client_secret: s}"
    text = f"""version: 1
listeners:
  - {{name: agents, address: "127.0.0.1:0", surface: agent, auth: none}}
upstreams:
  desk: {{kind: mcp, address: "127.0.0.1:8080", mcp: {{oauth: {oauth}}}}}
"""
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    found = {(p.path_in_file, p.message) for p in info.value.problems}
    assert found == {
        ("upstreams.desk.mcp.oauth.token_url", "must be https (http only on a loopback address)")
    }
    path.write_text(text.replace("http://idp.example", "http://127.0.0.1:9"))
    spec = load_settings(path, environ={}).upstreams["desk"].mcp
    assert spec is not None and spec.oauth is not None and spec.oauth.client_id == "c"
