"""`kind: http` config problems at file:line (the loader `capgate config check` and serve run)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gateway.cli.config import main as config_main
from gateway.config import ConfigError, load_settings

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


def _check(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "gateway.yaml"
    path.write_text(text)
    out = io.StringIO()
    with redirect_stdout(out):
        code = config_main(["check", str(path)])
    return code, [line.removeprefix(f"{path}:") for line in out.getvalue().splitlines()]


ADDRESS_RULE = (
    "a kind http upstream's address is host:port (a name, IPv4 or [IPv6] address and a port "
    "1-65535; no scheme, path, user, query or spaces)"
)


@pytest.mark.parametrize(
    ("address", "valid"),
    [
        ("127.0.0.1:8080", True),
        ("localhost:1", True),
        ("[::1]:65535", True),
        ("127.0.0.1:0", False),
        ("127.0.0.1:65536", False),
        ("127.0.0.1:http", False),
        ("127.0.0.1:80x", False),
        ("127.0.0.1", False),
        ("user@127.0.0.1:80", False),
        ("127.0.0.1:80?x=1", False),
        ("127.0.0.1:80#x", False),
        ("127.0.0.1:80/x", False),
        ("127.0.0.1 :80", False),
        ("127.0.0.1:80\\t", False),
        ("http://127.0.0.1:80", False),
        ("[::1:80", False),
        ("[zz::1]:80", False),
        ("::1:80", False),
    ],
)
def test_an_address_is_strictly_host_and_port(tmp_path: Path, address: str, valid: bool) -> None:
    code, lines = _check(
        tmp_path,
        "version: 1\nlisteners:\n"
        '  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}\n'
        f'upstreams:\n  api: {{kind: http, address: "{address}"}}\n',
    )
    assert (f"5: upstreams.api.address: {ADDRESS_RULE}" not in lines) is valid, lines
    assert (code == 0) is valid, lines


@pytest.mark.parametrize(
    ("block", "header", "denied"),
    [
        ("http: {headers: {HEADER: v}}", "Host", True),
        ("http: {headers: {HEADER: v}}", "content-length", True),
        ("http: {headers: {HEADER: v}}", "Transfer-Encoding", True),
        ("http: {headers: {HEADER: v}}", "Connection", True),
        ("http: {headers: {HEADER: v}}", "Authorization", False),
        ("http: {headers: {HEADER: v}}", "X-Api-Key", False),
        ("mcp: {headers: {HEADER: v}}", "Host", True),
        ("mcp: {headers: {HEADER: v}}", "Authorization", False),
        (
            "mcp: {headers: {HEADER: v}, oauth: {token_url: 'https://idp/t', client_id: c, "
            "client_secret: s}}",
            "Authorization",
            True,
        ),
    ],
)
def test_headers_capgate_sets_are_refused_in_headers(
    tmp_path: Path, block: str, header: str, denied: bool
) -> None:
    kind = block.split(":", 1)[0]
    code, lines = _check(
        tmp_path,
        "version: 1\nlisteners:\n"
        '  - {name: agents, address: "127.0.0.1:0", surface: agent, auth: none}\n'
        "upstreams:\n"
        "  api:\n"
        f"    kind: {kind}\n"
        '    address: "127.0.0.1:8080"\n'
        f"    {block.replace('HEADER', header)}\n",
    )
    message = (
        f"8: upstreams.api.{kind}.headers.{header}: {header} is set by capgate, not in headers"
    )
    assert (message in lines) is denied, lines
    if denied:
        assert code == 1


def test_a_placeholder_with_a_list_type_is_located_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    good = BASE.replace("HTTP", "{method: GET, path: '/x/{a}'}").replace("UPSTREAM", "api")
    for kinds, ok in (("[string, integer]", True), ("[string, object]", False), ("[]", False)):
        path.write_text(good.replace("a: {type: string}", f"a: {{type: {kinds}}}"))
        if ok:
            load_settings(path, environ={})
            continue
        with pytest.raises(ConfigError) as info:
            load_settings(path, environ={})
        assert (
            "capabilities[0].http.path",
            13,
            "{a} must have type string or integer in input_schema",
        ) in {(p.path_in_file, p.line, p.message) for p in info.value.problems}
