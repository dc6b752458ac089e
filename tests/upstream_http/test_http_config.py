"""`kind: http` config problems at file:line (the loader `capgate config check` and serve run)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_settings
from gateway.config.cli import main as config_main

BASE = """version: 1
listeners:
  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}
upstreams:
  api: {kind: http, address: "127.0.0.1:8080"}
  rpc: {kind: procedure, address: "127.0.0.1:8081"}
capabilities:
  - id: x.get
    description: d
    upstream: UPSTREAM
    side_effect: read
    risk: low
    http: HTTP
    input_schema:
      type: object
      required: [a]
      properties: {a: {type: string}, b: {type: string}, o: {type: object}}
"""


def _problems(tmp_path: Path, http: str, upstream: str = "api") -> set[tuple[str, int, str]]:
    path = tmp_path / "gateway.yaml"
    path.write_text(BASE.replace("HTTP", http).replace("UPSTREAM", upstream))
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    return {(p.path_in_file, p.line, p.message) for p in info.value.problems}


@pytest.mark.parametrize(
    ("http", "where", "message"),
    [
        (
            "{method: GET, path: '/x/{b}'}",
            "capabilities[0].http.path",
            "{b} must be a required property of input_schema",
        ),
        (
            "{method: GET, path: '/x/{o}'}",
            "capabilities[0].http.path",
            "{o} must have type string or integer in input_schema",
        ),
        (
            "{method: GET, path: '/x/{zz}'}",
            "capabilities[0].http.path",
            "{zz} is not a property of input_schema",
        ),
        (
            "{method: GET, path: /x/../y}",
            "capabilities[0].http.path",
            "a . or .. segment is not allowed",
        ),
        (
            "{method: GET, path: /x, query: [nope]}",
            "capabilities[0].http.query",
            "nope is not a property of input_schema",
        ),
    ],
)
def test_route_problems_are_located(tmp_path: Path, http: str, where: str, message: str) -> None:
    assert (where, 13, message) in _problems(tmp_path, http)


@pytest.mark.parametrize("path", ["/x/{a}b", "/x?q=1", "/x#f", "//x", "/x/%2e", "x", "http://h/x"])
def test_a_template_outside_the_grammar_is_refused_by_the_schema(tmp_path: Path, path: str) -> None:
    found = _problems(tmp_path, f"{{method: GET, path: '{path}'}}")
    assert any(where == "capabilities[0].http.path" and line == 13 for where, line, _ in found), (
        found
    )


def test_http_on_another_kind_of_upstream_is_refused(tmp_path: Path) -> None:
    found = _problems(tmp_path, "{method: GET, path: /x}", upstream="rpc")
    assert ("capabilities[0].http", 13, "only used with an upstream of kind: http") in found


@pytest.mark.parametrize(
    ("upstream", "refused", "names"),
    [
        ("{kind: http, address: 'files.internal:8080'}", True, "(the actor token)"),
        (
            "{kind: http, address: '10.0.0.5:8080', http: {headers: {Authorization: x}}}",
            True,
            "(the actor token, http.headers)",
        ),
        (
            "{kind: mcp, address: 'desk.internal:8000', mcp: {oauth: {token_url: "
            "'https://idp.internal/t', client_id: c, client_secret: s}}}",
            True,
            "(the actor token, the mcp.oauth access token)",
        ),
        ("{kind: mcp, address: 'desk.internal:8000', tls: false}", True, "(the actor token)"),
        ("{kind: http, address: 'files.internal:8443', tls: true}", False, ""),
        ("{kind: http, address: 'localhost:8080'}", False, ""),
        ("{kind: http, address: '127.0.0.9:8080'}", False, ""),
        ("{kind: mcp, address: '[::1]:8080', mcp: {headers: {Authorization: x}}}", False, ""),
    ],
)
def test_credentials_in_plaintext_are_refused_unless_loopback(
    tmp_path: Path, upstream: str, refused: bool, names: str
) -> None:
    """`capgate config check` names the address (file:line) of a plaintext upstream off this
    machine: every request to it carries the actor token (and headers / OAuth when set)."""
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "version: 1\n"
        "listeners:\n"
        '  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}\n'
        "upstreams:\n"
        f"  far: {upstream}\n"
    )
    out = io.StringIO()
    with redirect_stdout(out):
        code = config_main(["check", str(path)])
    message = (
        f"{path}:5: upstreams.far.address: credentials would travel in plaintext {names}: "
        "tls: false needs a loopback address"
    )
    assert (message in out.getvalue().splitlines()) is refused, out.getvalue()
    if refused:
        assert code == 1
