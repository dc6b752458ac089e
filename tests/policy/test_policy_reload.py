"""Hot reload: new sets are compiled off the request path and swapped atomically.

Edits are published atomically (write a temporary file, rename it over the old one), as a
ConfigMap update or an editor's save does, so each poll sees the old or the new file and the
tests do not depend on timing. Non-atomic writers are tested by driving `poll()` with an
injected settle wait, during which the writer moves on (issue 14)."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

import pytest

from policy import Decision, EvalRequest, Phase, PolicyLoadError
from policy.reload import PolicyWatcher

ALLOW = "policies: [{name: gate, rules: [{when: 'true', effect: allow}]}]\n"
DENY = "policies: [{name: gate, rules: [{when: 'true', effect: deny, message: closed}]}]\n"
BROKEN = "policies: [{name: gate, rules: [{when: 'true +', effect: deny}]}]\n"
WAIT = 10.0  # seconds to wait for an event; a pass takes one poll interval
REQUEST = EvalRequest(actor={"id": "u", "kind": "user"}, capability={"id": "orders.get"})


class Events:
    """Collects watcher callbacks (and the threads they ran on) for the test to wait on."""

    def __init__(self) -> None:
        self.swaps: queue.Queue = queue.Queue()
        self.errors: queue.Queue = queue.Queue()

    def on_swap(self, policy_set) -> None:
        self.swaps.put((policy_set, threading.current_thread()))

    def on_error(self, error) -> None:
        self.errors.put(error)


def decision(watcher: PolicyWatcher) -> Decision:
    assert watcher.current is not None
    return watcher.current.evaluate_all(Phase.INVOCATION, REQUEST).decision


@pytest.fixture
def events() -> Events:
    return Events()


def watch(directory: Path, events: Events) -> PolicyWatcher:
    return PolicyWatcher(directory, events.on_swap, events.on_error, interval_s=0.02, settle_s=0.02)


def publish(path: Path, text: str) -> None:
    """Replace `path` in one rename: readers see the old or the new content, never a part."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_start_loads_synchronously_and_refuses_an_invalid_set(tmp_path, events):
    (tmp_path / "p.yaml").write_text(BROKEN)

    with pytest.raises(PolicyLoadError):
        watch(tmp_path, events).start()


def test_an_edit_is_compiled_in_the_watcher_thread_and_swapped_in(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    with watch(tmp_path, events) as watcher:
        first = watcher.current
        assert decision(watcher) is Decision.ALLOW

        publish(tmp_path / "p.yaml", DENY)
        swapped, thread = events.swaps.get(timeout=WAIT)

        assert thread.name == "policy-watcher"
        assert thread is not threading.main_thread()
        assert watcher.current is swapped
        assert swapped.revision != first.revision
        assert decision(watcher) is Decision.DENY


def test_a_broken_edit_keeps_the_last_good_set_and_says_why(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    with watch(tmp_path, events) as watcher:
        good = watcher.current

        publish(tmp_path / "p.yaml", BROKEN)
        error = events.errors.get(timeout=WAIT)

        assert isinstance(error, PolicyLoadError)
        assert "Syntax error" in str(error)
        assert watcher.current is good
        assert decision(watcher) is Decision.ALLOW

        publish(tmp_path / "p.yaml", DENY)  # fixing it swaps again
        events.swaps.get(timeout=WAIT)
        assert decision(watcher) is Decision.DENY
    assert events.errors.empty()  # the broken revision was reported once


def test_a_configmap_style_symlink_swap_is_picked_up(tmp_path, events):
    # Kubernetes mounts each key as `name -> ..data/name`, with `..data -> ..<timestamp>`,
    # and updates by pointing `..data` at a new directory in one rename.
    first = tmp_path / "..2025_03_04_10_00_00.1"
    first.mkdir()
    (first / "gate.yaml").write_text(ALLOW)
    os.symlink(first.name, tmp_path / "..data")
    os.symlink("..data/gate.yaml", tmp_path / "gate.yaml")

    with watch(tmp_path, events) as watcher:
        assert watcher.current.policy_names == ("gate",)  # hidden directories are not loaded twice
        assert decision(watcher) is Decision.ALLOW

        second = tmp_path / "..2025_03_04_11_00_00.2"
        second.mkdir()
        (second / "gate.yaml").write_text(DENY)
        os.symlink(second.name, tmp_path / "..data_tmp")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        events.swaps.get(timeout=WAIT)

        assert decision(watcher) is Decision.DENY


def test_poll_without_changes_does_nothing(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    watcher = PolicyWatcher(tmp_path, events.on_swap, events.on_error, settle_s=0.01)
    watcher.start()
    try:
        assert watcher.poll() is False
        (tmp_path / "q.yaml").write_text(
            "policies: [{name: other, rules: [{when: 'true', effect: hide}]}]"
        )
        assert watcher.poll() is True
        assert watcher.current.policy_names == ("gate", "other")
    finally:
        watcher.stop()


def test_a_failing_callback_does_not_stop_the_watcher(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    calls: queue.Queue = queue.Queue()

    def explode(policy_set) -> None:
        calls.put(policy_set)
        raise RuntimeError("subscriber bug")

    with PolicyWatcher(
        tmp_path, explode, events.on_error, interval_s=0.02, settle_s=0.02
    ) as watcher:
        publish(tmp_path / "p.yaml", DENY)
        calls.get(timeout=WAIT)
        publish(tmp_path / "p.yaml", ALLOW)
        calls.get(timeout=WAIT)

        assert decision(watcher) is Decision.ALLOW


def test_a_watcher_cannot_be_started_twice(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    with watch(tmp_path, events) as watcher, pytest.raises(RuntimeError, match="already running"):
        watcher.start()


# A deny set whose prefix, cut after the first policy, is a valid allow-only set: the fail-open
# window a half-written file opens (issue 14).
GUARDED = """policies:
  - name: a-open
    rules: [{when: 'true', effect: allow}]
  - name: z-gate
    rules: [{when: 'true', effect: deny, message: closed}]
"""
CUT = GUARDED.index("  - name: z-gate")


class ChunkedWriter:
    """Writes a file in place (truncate, then chunks), one chunk per settle wait: the file is
    always changing when the watcher looks again, until the last chunk is written."""

    def __init__(self, path: Path, chunks: list[str]) -> None:
        self.path = path
        self.chunks = list(chunks)
        self.handle = path.open("w")  # truncated now, like a shell redirect or an editor
        self.waits = 0

    def step(self, _seconds: float = 0.0) -> None:
        self.waits += 1
        if self.chunks:
            self.handle.write(self.chunks.pop(0))
            self.handle.flush()
            if not self.chunks:
                self.handle.close()


def test_a_file_being_written_in_place_is_not_applied_until_it_settles(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW.replace("gate", "old"))
    writer: ChunkedWriter | None = None

    def settle(seconds: float) -> None:
        if writer is not None:
            writer.step(seconds)

    watcher = PolicyWatcher(tmp_path, events.on_swap, events.on_error, settle=settle)
    watcher.start()
    try:
        good = watcher.current
        writer = ChunkedWriter(tmp_path / "p.yaml", [GUARDED[:CUT], GUARDED[CUT:]])
        # The file is empty now (an empty set allows everything), then holds the allow-only
        # prefix: each poll sees it change during the settle wait and applies nothing.
        assert (tmp_path / "p.yaml").read_text() == ""
        assert watcher.poll() is False
        assert (tmp_path / "p.yaml").read_text() == GUARDED[:CUT]
        assert watcher.poll() is False
        assert watcher.current is good and events.swaps.empty() and events.errors.empty()
        # Written completely and unchanged across the settle wait: now it applies.
        assert watcher.poll() is True
        assert decision(watcher) is Decision.DENY
        assert watcher.current.policy_names == ("a-open", "z-gate")
        assert writer.waits == 3
    finally:
        watcher.stop()


def test_a_prefix_that_parses_is_never_applied_whatever_the_chunking(tmp_path, events):
    """Every split of the deny set into two non-empty in-place writes: no poll applies a
    partial set. (A writer idle for a whole settle wait is indistinguishable from one that
    finished: settling bounds the pause between chunks, it cannot see intent.)"""
    lines = GUARDED.splitlines(keepends=True)
    for cut in range(1, len(lines)):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / "p.yaml").write_text(DENY.replace("closed", "before"))
        state: dict[str, ChunkedWriter] = {}
        watcher = PolicyWatcher(
            directory,
            events.on_swap,
            events.on_error,
            settle=lambda seconds, state=state: state["writer"].step(seconds) if state else None,
        )
        watcher.start()
        try:
            head, tail = "".join(lines[:cut]), "".join(lines[cut:])
            state["writer"] = ChunkedWriter(directory / "p.yaml", [head, tail])
            for _ in range(4):
                watcher.poll()
                evaluation = watcher.current.evaluate_all(Phase.INVOCATION, REQUEST)
                assert evaluation.decision is Decision.DENY, (cut, watcher.current.policy_names)
            assert watcher.current.policy_names == ("a-open", "z-gate")
        finally:
            watcher.stop()
