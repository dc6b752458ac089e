"""docs/errors.md lists every public message a code can carry (issue 25 item 9).

The error table (`gateway/errors.py`) holds each code's message and its `others`; docs/errors.md
is rendered from it. This test reads every `CapabilityError(...)` constructed in gateway/ with a
message and compares the two ways: each message the code can produce is in the table under its
code, and each `others` entry is produced somewhere. A literal must be listed word for word, an
f-string must match an entry (its `{...}` parts match anything), and a message that comes from
elsewhere (a policy, a hook, an upstream) must be one of the known pass-throughs below.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.cli import errordocs
from gateway.errors import TABLE, Code

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"

# (module, the message expression as ast.unparse writes it) -> (code, the table's text). A new
# pass-through fails the test until it is listed here and in the table.
PASSTHROUGHS: dict[tuple[str, str], tuple[Code, str]] = {
    ("gateway/pipeline/stages/policies.py", "message"): (
        Code.POLICY_DENIED,
        "{the denying policy's message}",
    ),
    ("gateway/pipeline/stages/hooks.py", "None if ev.failed else ev.message"): (
        Code.POLICY_DENIED,
        "{the denying policy's message}",
    ),
    ("gateway/pipeline/stages/hooks.py", "answer.message[:512] or None"): (
        Code.HOOK_DENIED,
        "{the denying hook's message}",
    ),
    ("gateway/upstream/status.py", "message"): (
        Code.EXECUTION_FAILED,
        "{the upstream's public message}",
    ),
    ("gateway/upstream/http.py", "_contract_message(body, headers.get('content-type', ''))"): (
        Code.EXECUTION_FAILED,
        "{the upstream's public message}",
    ),
    ("gateway/transport/admin/grants.py", "message"): (
        Code.INPUT_INVALID,
        "{the grant request's problem}",
    ),
    ("gateway/upstream/mcpcall.py", "public_text(' '.join(texts))"): (
        Code.EXECUTION_FAILED,
        "{the upstream's public message}",
    ),
}


@dataclass(frozen=True)
class Site:
    """One `CapabilityError(...)` with a message: where, its code (None when not a literal
    `Code.X`) and the message expression."""

    module: str
    line: int
    code: Code | None
    message: ast.expr


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "text"` (or annotated) assignments: messages kept as constants."""
    found: dict[str, str] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        text = value.value if isinstance(value, ast.Constant) else None
        if isinstance(target, ast.Name) and isinstance(text, str):
            found[target.id] = text
    return found


def _code_of(node: ast.expr) -> Code | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Code"
    ):
        return Code(node.attr)
    return None


def _sites() -> tuple[list[Site], dict[str, dict[str, str]]]:
    sites: list[Site] = []
    constants: dict[str, dict[str, str]] = {}
    for path in sorted(GATEWAY.rglob("*.py")):
        module = str(path.relative_to(ROOT))
        if "/v1/" in module or module.endswith("_pb2.py"):
            continue
        tree = ast.parse(path.read_text(), filename=module)
        constants[module] = _constants(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "CapabilityError"
            ):
                continue
            message = next((k.value for k in node.keywords if k.arg == "message"), None)
            if message is None and len(node.args) > 1:
                message = node.args[1]
            if message is None:
                continue
            code = _code_of(node.args[0]) if node.args else None
            sites.append(Site(module, node.lineno, code, message))
    return sites, constants


def _pattern(node: ast.JoinedStr) -> re.Pattern[str]:
    parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
    return re.compile("".join(parts))


def _produced() -> set[tuple[Code, str]]:
    """(code, table text) for every message site; fails on a message the table lacks."""
    sites, constants = _sites()
    assert len(sites) >= 10, "the scan found too few CapabilityError messages"
    produced: set[tuple[Code, str]] = set()
    problems: list[str] = []
    for site in sites:
        where = f"{site.module}:{site.line}"
        node = site.message
        if isinstance(node, ast.Name) and node.id in constants[site.module]:
            node = ast.Constant(constants[site.module][node.id])
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if site.code is None:
                problems.append(f"{where}: a literal message needs a literal Code.X")
                continue
            spec = TABLE[site.code]
            if node.value != spec.message and node.value not in {o.text for o in spec.others}:
                problems.append(f"{where}: {site.code.value} {node.value!r} is not in the table")
            produced.add((site.code, node.value))
        elif isinstance(node, ast.JoinedStr):
            if site.code is None:
                problems.append(f"{where}: a formatted message needs a literal Code.X")
                continue
            pattern = _pattern(node)
            matched = [o.text for o in TABLE[site.code].others if pattern.fullmatch(o.text)]
            if not matched:
                problems.append(f"{where}: {site.code.value} {pattern.pattern!r} not in the table")
            produced.update((site.code, text) for text in matched)
        else:
            known = PASSTHROUGHS.get((site.module, ast.unparse(node)))
            if known is None:
                problems.append(f"{where}: message {ast.unparse(node)!r} is not a known one")
                continue
            if site.code is not None and site.code is not known[0]:
                problems.append(f"{where}: {site.code.value}, listed as {known[0].value}")
            produced.add(known)
    assert not problems, "\n".join(problems)
    return produced


def test_every_public_message_the_gateway_constructs_is_in_the_error_table() -> None:
    _produced()


def test_every_other_message_in_the_table_is_produced_by_some_code() -> None:
    produced = _produced()
    listed = {(code, other.text) for code, spec in TABLE.items() for other in spec.others}
    assert listed - produced == set(), "listed in gateway/errors.py but produced nowhere"
    for code, text in listed:
        assert text != TABLE[code].message


def test_docs_errors_md_lists_every_message_of_every_code() -> None:
    doc = (ROOT / "docs" / "errors.md").read_text()
    assert doc == errordocs.render()  # generated from the table, nothing added by hand
    for code, spec in TABLE.items():
        assert f"| `{code.value}` |" in doc
        assert f" | {spec.message} | " in doc
        for other in spec.others:
            assert f"| `{code.value}` | {other.text} | {other.when} |" in doc
