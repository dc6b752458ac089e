"""`DEMO_HOLD=1 make demo` as a newcomer runs it: `python -m examples.demo` in a subprocess on the
demo's own ports, read until it has printed its last command, and stopped as its output says
(Ctrl-C). Tests paste what it printed into a shell, as they are; nothing here knows the
gateway's modules."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The held demo's last line: the command that resumes the refund it left waiting.
LAST_LINE = " resume "


@dataclass
class HeldDemo:
    """The output of a held demo that is still running."""

    stdout: list[str]
    stderr_path: Path

    def line(self, contains: str) -> str:
        """The one printed line containing `contains`, stripped of its indentation."""
        found = [line.strip() for line in self.stdout if contains in line]
        assert len(found) == 1, (contains, found)
        return found[0]

    def value(self, label: str) -> str:
        """What follows `label` on its line (`"caller credential (alice): "` -> the token)."""
        return self.line(label).split(label, 1)[1].strip()

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def shell(script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`script` pasted into bash in the repository root, where the demo prints paths from."""
    return subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def held_demo(stderr_path: Path) -> Iterator[HeldDemo]:
    """Start the held demo, wait for its last printed line, yield, then Ctrl-C it (it must exit 0).
    Its ports are the demo config's (7443-7445): a demo already running makes this fail."""
    env = {**os.environ, "DEMO_HOLD": "1", "DEMO_INBOX_LISTEN": "127.0.0.1:0"}
    with stderr_path.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "examples.demo"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        # readline blocks until the demo prints (it flushes every line) or exits (EOF).
        for line in iter(process.stdout.readline, ""):
            lines.append(line.rstrip("\n"))
            if LAST_LINE in line:
                break
        else:
            raise AssertionError(
                "the held demo ended before printing its commands:\n"
                + "\n".join(lines[-40:])
                + stderr_path.read_text()[-4000:]
            )
        yield HeldDemo(lines, stderr_path)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        process.stdout.close()
    assert code == 0, stderr_path.read_text()[-4000:]
