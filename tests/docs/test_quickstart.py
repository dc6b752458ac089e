"""docs/quickstart.md walked verbatim (issue 27): its marked blocks, read from the doc at test
time, are pasted in order into ONE bash, as a reader pastes them into one terminal (exports and
background jobs carry over), in a copy of examples/quickstart/ next to the project's venv. Each
block's output goes to a file and its exit status is checked; the servers it starts in the
background are stopped with the shell's process group. A changed doc changes what runs here."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.snippets import ROOT, Snippet, extract

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "quickstart.md"
# The blocks in the doc's order, and the exit status of each one's last command.
STEPS = {
    "quickstart-start": 0,
    "quickstart-check": 0,
    "quickstart-serve": 0,
    "quickstart-invoke": 0,
    "quickstart-approval": 4,  # `capgate invoke` exits 4: approval required
    "quickstart-approve": 0,
    "quickstart-resume": 0,
}


class Terminal:
    """One bash fed block by block on stdin; `paste` returns a block's status and output."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAPGATE_")}
        self.bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-o", "pipefail"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def paste(self, snippet: Snippet) -> tuple[int, str]:
        assert self.bash.stdin is not None and self.bash.stdout is not None
        out = self.cwd / f"{snippet.name}.out"
        self.bash.stdin.write(f'{{\n{snippet.text}}} > {out} 2>&1\necho "::done $?"\n')
        self.bash.stdin.flush()
        line = self.bash.stdout.readline()
        assert line.startswith("::done "), f"the shell ended in {snippet.name}: {out.read_text()}"
        return int(line.split()[1]), out.read_text()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.bash.pid, signal.SIGTERM)
        self.bash.wait(30)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "examples" / "quickstart")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    running = Terminal(tmp_path)
    try:
        yield running
    finally:
        running.close()


@pytest.mark.timeout(300)
def test_quickstart_as_written(terminal: Terminal) -> None:
    started = time.monotonic()
    snippets = extract(DOC)
    assert list(snippets) == list(STEPS), "docs/quickstart.md's blocks changed: update STEPS"
    outputs: dict[str, str] = {}
    for name, expected in STEPS.items():
        status, output = terminal.paste(snippets[name])
        assert status == expected, f"{name} exited {status}:\n{output}"
        outputs[name] = output
        if name == "quickstart-serve":  # its loop also ends when serve exits: did it start?
            ready = terminal.cwd / "quickstart.ready"
            assert ready.is_file(), (terminal.cwd / "serve.log").read_text()[-4000:]
    assert "ok: 2 listeners, 1 capabilit" in outputs["quickstart-check"]
    assert "2 passed, 0 failed" in outputs["quickstart-check"]
    assert "refunds.create" in outputs["quickstart-invoke"]
    assert (
        "status:" in outputs["quickstart-invoke"]
        and '"refund_id": "r-1"' in outputs["quickstart-invoke"]
    )
    assert re.search(r"status: +approval required", outputs["quickstart-approval"])
    assert ": approved" in outputs["quickstart-approve"]
    resumed = outputs["quickstart-resume"]
    assert "completed" in resumed and '"amount": 250' in resumed, resumed
    assert "executed" in resumed, resumed  # approval status after the resume
    # The resumed refund ran exactly once: the service made two refunds in all.
    assert '"refund_id": "r-2"' in resumed and "r-3" not in resumed
    print(f"\nquickstart walked in {time.monotonic() - started:.1f} s")
    json.dumps(outputs)  # every output is text
