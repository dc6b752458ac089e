"""Hot reload: new sets are compiled off the request path and swapped atomically."""

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
    return PolicyWatcher(directory, events.on_swap, events.on_error, interval_s=0.02)


def test_start_loads_synchronously_and_refuses_an_invalid_set(tmp_path, events):
    (tmp_path / "p.yaml").write_text(BROKEN)

    with pytest.raises(PolicyLoadError):
        watch(tmp_path, events).start()


def test_an_edit_is_compiled_in_the_watcher_thread_and_swapped_in(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    with watch(tmp_path, events) as watcher:
        first = watcher.current
        assert decision(watcher) is Decision.ALLOW

        (tmp_path / "p.yaml").write_text(DENY)
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

        (tmp_path / "p.yaml").write_text(BROKEN)
        error = events.errors.get(timeout=WAIT)

        assert isinstance(error, PolicyLoadError)
        assert "Syntax error" in str(error)
        assert watcher.current is good
        assert decision(watcher) is Decision.ALLOW

        (tmp_path / "p.yaml").write_text(DENY)  # fixing it swaps again
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
    watcher = PolicyWatcher(tmp_path, events.on_swap, events.on_error)
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

    with PolicyWatcher(tmp_path, explode, events.on_error, interval_s=0.02) as watcher:
        (tmp_path / "p.yaml").write_text(DENY)
        calls.get(timeout=WAIT)
        (tmp_path / "p.yaml").write_text(ALLOW)
        calls.get(timeout=WAIT)

        assert decision(watcher) is Decision.ALLOW


def test_a_watcher_cannot_be_started_twice(tmp_path, events):
    (tmp_path / "p.yaml").write_text(ALLOW)
    with watch(tmp_path, events) as watcher, pytest.raises(RuntimeError, match="already running"):
        watcher.start()
