"""`capgate serve --workers auto`, the default (issue 29 item 5): one worker per available core
(the CPUs this process may run on, bounded by a cgroup CPU limit) where more than one is and
the config can run that way; one process otherwise, never a refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.process.workers import available_cores, resolve
from gateway.state.embedded import RedisProcess, free_port
from tests.gateway.test_workers import ROOT, _config


def _cgroup(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_cgroup_cpu_limit_bounds_the_cores(tmp_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    assert available_cores(_cgroup(tmp_path / "none")) == cpus
    assert available_cores(_cgroup(tmp_path / "max", **{"cpu.max": "max 100000\n"})) == cpus
    assert available_cores(_cgroup(tmp_path / "one", **{"cpu.max": "150000 100000\n"})) == 1
    assert available_cores(_cgroup(tmp_path / "half", **{"cpu.max": "50000 100000\n"})) == 1
    v1 = _cgroup(
        tmp_path / "v1",
        **{"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"},
    )
    assert available_cores(v1) == 1
    big = _cgroup(tmp_path / "big", **{"cpu.max": "6400000 100000\n"})
    assert available_cores(big) == cpus  # a limit above the CPUs it may run on


def test_auto_falls_back_to_one_process_where_several_would_be_refused(tmp_path: Path) -> None:
    # The embedded Redis with approvals on: --workers 2 is refused; auto runs one process.
    assert resolve("auto", str(_config(tmp_path, redis_url=None))) == 1
    assert resolve(3, str(_config(tmp_path, redis_url=None))) == 3  # a number is kept


@pytest.mark.integration
@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_serve_runs_one_worker_per_core_by_default(
    tmp_path: Path, redis_server: RedisProcess
) -> None:
    cores = available_cores()
    if cores < 2:
        pytest.skip("one core: auto is one process")  # the machine decides, not the test
    ready = tmp_path / "ready.json"
    config = _config(tmp_path, redis_url=redis_server.url, port=free_port())
    argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config)]
    argv += ["--ready-file", str(ready), "--no-watch", "--grace", "1", "--log-level", "WARNING"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        assert info["workers"] == cores
        assert len(set(info["pids"])) == cores
    finally:
        proc.terminate()
        proc.wait(30)
