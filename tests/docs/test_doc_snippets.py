"""The docs' runnable snippets run as written (issue 27): every block marked
`<!-- snippet: NAME -->` in README.md, docs/ and the clients' READMEs is read from the doc at
test time (tests/docs/snippets.py) and run against the held demo (`DEMO_HOLD=1 make demo`),
after the `export CAPGATE_TOKEN=… MCP_TOKEN=…` line the demo prints, as a reader pastes it.
Editing a block changes what runs here; marking a new one without running it here fails."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.held_demo import HeldDemo, held_demo
from tests.docs.snippets import ROOT, Snippet, SnippetError, extract, extract_all, run
from tests.docs.test_quickstart import STEPS as QUICKSTART_STEPS

pytestmark = pytest.mark.integration

RUN_HERE = {
    "readme-python",
    "readme-grpcurl",
    "mcp-python",
    "python-client",
    "go-main",
    "go-install",
}
# docs/quickstart.md's blocks run in one shell, in order: tests/docs/test_quickstart.py.
RUN_IN_QUICKSTART = set(QUICKSTART_STEPS)


@pytest.fixture(scope="module")
def snippets() -> dict[str, Snippet]:
    return extract_all()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldDemo]:
    with held_demo(Path(tmp_path_factory.mktemp("held-demo")) / "stderr") as running:
        yield running


@pytest.fixture(scope="module")
def pasted(demo: HeldDemo) -> str:
    """The line the held demo prints for the snippets, as a reader pastes it."""
    return demo.line("MCP_TOKEN=")


def test_every_marked_snippet_is_run_here(snippets: dict[str, Snippet]) -> None:
    assert set(snippets) == RUN_HERE | RUN_IN_QUICKSTART, {
        name: s.where for name, s in snippets.items()
    }


def test_readme_python_try_it(snippets: dict[str, Snippet], pasted: str) -> None:
    done = run(snippets["readme-python"], prelude=pasted)
    assert done.returncode == 0, done.stderr
    described, invoked = done.stdout.splitlines()
    assert "orders.get" in described
    assert invoked.startswith("Completed("), invoked
    assert "'order_id': 'o-1001'" in invoked


def test_readme_grpcurl_invoke(snippets: dict[str, Snippet], pasted: str) -> None:
    done = run(snippets["readme-grpcurl"], prelude=pasted, timeout=600)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["execution_state"] == "EXECUTION_STATE_COMPLETED", envelope
    assert json.loads(envelope["completed"]["output_json"])["order_id"] == "o-1001"


def test_mcp_try_it(snippets: dict[str, Snippet], pasted: str) -> None:
    done = run(snippets["mcp-python"], prelude=pasted)
    assert done.returncode == 0, done.stderr
    tools, called = done.stdout.splitlines()
    assert "'orders_get'" in tools
    assert "is_error=False" in called
    assert "'order_id': 'o-1001'" in called


def test_python_client_readme(snippets: dict[str, Snippet], pasted: str) -> None:
    done = run(snippets["python-client"], prelude=pasted)
    assert done.returncode == 0, done.stderr
    described, outcome = done.stdout.splitlines()
    assert "orders.refund" in described
    assert outcome.startswith("needs approval "), outcome  # a refund of 800 asks a manager


@pytest.mark.timeout(900)  # a cold Go build cache compiles grpc (about a minute on 2 cores)
def test_go_client_readme(snippets: dict[str, Snippet], pasted: str, tmp_path: Path) -> None:
    assert snippets["go-main"].lang == "go"
    (tmp_path / "main.go").write_text(snippets["go-main"].text)
    done = run(
        snippets["go-install"],
        prelude=pasted,
        cwd=tmp_path,
        env={"CAPGATE": str(ROOT)},
        timeout=800,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "orders.get" in lines
    assert json.loads(lines[-1])["order_id"] == "o-1001"


# The extractor itself: what a marker must mark, and shell blocks of `capgate` commands.


def test_a_marker_must_precede_a_closed_fence(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- snippet: lonely -->\n\n```sh\ntrue\n```\n")
    with pytest.raises(SnippetError, match="not followed by a fence"):
        extract(doc)
    doc.write_text("<!-- snippet: open -->\n```sh\ntrue\n")
    with pytest.raises(SnippetError, match="not closed"):
        extract(doc)
    doc.write_text(
        "<!-- snippet: twice -->\n```sh\na\n```\n<!-- snippet: twice -->\n```sh\nb\n```\n"
    )
    with pytest.raises(SnippetError, match="marked twice"):
        extract(doc)


def test_a_shell_block_runs_the_projects_capgate(tmp_path: Path) -> None:
    """What docs/quickstart.md will need: `capgate ...` lines run as the reader's shell runs
    them, the venv's console script first on PATH, a failing line failing the block."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- snippet: cli -->\n```sh\ncapgate --help | head -1\ncapgate no-such-command\n"
        "echo never\n```\n"
    )
    done = run(extract(doc)["cli"], cwd=tmp_path)
    assert done.returncode != 0
    assert "never" not in done.stdout
    assert done.stdout.strip(), "capgate --help printed nothing"
