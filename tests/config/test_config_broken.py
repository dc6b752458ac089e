"""The broken-config corpus (tests/config/broken/): `capgate config check` refuses every config
`capgate serve` refuses, with the same problems at the same file:line.

Each `NN-*.yaml` states what it breaks and, in `# expect:` lines at its end, every problem both
commands must report. Both run as real subprocesses of the installed console script; serve
gets a short timeout, and a serve still running at its end started a config it should have
refused. They share one loader (gateway/process/load.py), so they cannot diverge; this
test is what says so.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "config" / "broken"
CAPGATE = str(Path(sys.executable).parent / "capgate")
CASES = sorted(p for p in BROKEN.glob("[0-9][0-9]-*.yaml") if p.name != "00-valid.yaml")
SERVE_TIMEOUT_S = 60
_REFUSAL = re.compile(r"^capgate: cannot start: invalid config, (\d+) problem\(s\):$")

pytestmark = pytest.mark.integration


def _environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPGATE_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _expected(case: Path) -> list[str]:
    lines = [
        line.removeprefix("# expect: ")
        for line in case.read_text().splitlines()
        if line.startswith("# expect: ")
    ]
    return sorted(f"{BROKEN}/{line}".replace("{dir}", str(BROKEN)) for line in lines)


def _flags(case: Path) -> list[str]:
    for line in case.read_text().splitlines():
        if line.startswith("# check-with: "):
            return line.removeprefix("# check-with: ").split()
    return []


def _matches(got: list[str], want: list[str]) -> bool:
    if len(got) != len(want):
        return False
    return all(
        g.startswith(w[:-3]) if w.endswith("...") else g == w
        for g, w in zip(sorted(got), want, strict=True)
    )


async def _run(*args: str, timeout_s: float) -> tuple[int | None, str, str]:
    """Exit code (None: still running at the timeout, then killed), stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=ROOT,
        env=_environ(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        return None, out.decode(), err.decode()
    return proc.returncode, out.decode(), err.decode()


def _serve_problems(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        found = _REFUSAL.match(line)
        if found:
            problems = [x.removeprefix("  ") for x in lines[i + 1 :] if x.startswith("  ")]
            assert len(problems) == int(found.group(1)), stderr
            return problems
    raise AssertionError(f"serve did not refuse with the problem list:\n{stderr}")


def test_the_corpus_covers_every_kind_of_problem() -> None:
    assert len(CASES) >= 11
    assert all(_expected(case) for case in CASES), "every case states what it expects"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
async def test_check_and_serve_refuse_with_the_same_problems(case: Path) -> None:
    expected = _expected(case)
    check, serve = await asyncio.gather(
        _run(CAPGATE, "config", "check", *_flags(case), str(case), timeout_s=SERVE_TIMEOUT_S),
        _run(CAPGATE, "serve", "--config", str(case), "--no-watch", timeout_s=SERVE_TIMEOUT_S),
    )
    code, out, err = check
    assert code == 1, (out, err)
    *reported, count = out.splitlines()  # the problems, then their count (same stream)
    assert count == f"{len(reported)} problem{'' if len(reported) == 1 else 's'}", out
    assert _matches(reported, expected), f"config check said:\n{out}\nexpected:\n" + "\n".join(
        expected
    )
    code, _, err = serve
    assert code is not None, f"serve started a config it must refuse:\n{err}"
    assert code == 2, err
    assert "Traceback" not in err
    # One loader: the same problems, word for word (gRPC's details included).
    assert sorted(_serve_problems(err)) == sorted(reported)


async def test_the_control_config_passes_the_check_and_serves(tmp_path: Path) -> None:
    """The corpus's base config is valid: each broken case fails for its own reason."""
    valid = BROKEN / "00-valid.yaml"
    code, out, err = await _run(CAPGATE, "config", "check", str(valid), timeout_s=SERVE_TIMEOUT_S)
    assert code == 0, (out, err)
    assert out.startswith("ok: 1 listener, 2 capabilities, revision ")
    ready = tmp_path / "ready.json"
    proc = await asyncio.create_subprocess_exec(
        CAPGATE,
        "serve",
        "--config",
        str(valid),
        "--no-watch",
        "--ready-file",
        str(ready),
        cwd=ROOT,
        env=_environ(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        deadline = asyncio.get_running_loop().time() + SERVE_TIMEOUT_S
        while not ready.exists():
            assert proc.returncode is None, "serve exited"
            assert asyncio.get_running_loop().time() < deadline, "serve never became ready"
            await asyncio.sleep(0.1)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), SERVE_TIMEOUT_S)


async def test_reflection_upstreams_are_resolved_only_when_asked() -> None:
    """Without --resolve-reflection no upstream is contacted: the check passes and says which
    capabilities it could not check."""
    case = BROKEN / "18-reflection-unreachable.yaml"
    code, out, err = await _run(CAPGATE, "config", "check", str(case), timeout_s=SERVE_TIMEOUT_S)
    assert code == 0, (out, err)
    assert "methods not checked" in err and "inventory.get" in err


async def test_resolve_reflection_checks_methods_against_a_live_upstream(tmp_path: Path) -> None:
    """With --resolve-reflection the check asks the upstream (the real example server, by
    server reflection), finds a misspelt method and types `input` from the reflected message,
    exactly as serve does."""
    from examples.orders.server import serve as serve_orders  # noqa: PLC0415

    server, port = await serve_orders("127.0.0.1:0")
    try:
        shutil.copytree(BROKEN / "policies", tmp_path / "policies")
        text = (BROKEN / "00-valid.yaml").read_text()
        text = text.replace("address: 127.0.0.1:1", f"address: 127.0.0.1:{port}")
        text = text.replace("    descriptor_set: ../../../examples/orders/orders.pb\n", "")
        good = tmp_path / "good.yaml"
        good.write_text(text)
        code, out, err = await _run(
            CAPGATE, "config", "check", "--resolve-reflection", str(good), timeout_s=60
        )
        assert code == 0, (out, err)
        assert "methods not checked" not in err
        bad = tmp_path / "bad.yaml"
        bad.write_text(text.replace("/orders.v1.Orders/GetOrder", "/orders.v1.Orders/GetOrdr"))
        (bad_policies := tmp_path / "policies" / "typo").mkdir()
        (bad_policies / "p.yaml").write_text(
            (BROKEN / "policies" / "proto-input-field" / "p.yaml").read_text()
        )
        bad.write_text(
            bad.read_text().replace("paths: [policies/ok]", "paths: [policies/ok, policies/typo]")
        )
        check, serve = await asyncio.gather(
            _run(CAPGATE, "config", "check", "--resolve-reflection", str(bad), timeout_s=60),
            _run(CAPGATE, "serve", "--config", str(bad), "--no-watch", timeout_s=60),
        )
        code, out, err = check
        assert code == 1, (out, err)
        *problems, count = out.splitlines()
        assert problems == [
            f"{bad}:20: capabilities[0].method: upstream orders (capability orders.get): "
            "service orders.v1.Orders has no method GetOrdr",
        ], out
        assert count == "1 problem"
        assert serve[0] == 2, serve
        assert _serve_problems(serve[2]) == problems
        # The method fixed, the reflected GetOrderRequest types `input`: the typo is found.
        bad.write_text(bad.read_text().replace("GetOrdr", "GetOrder"))
        code, out, err = await _run(
            CAPGATE, "config", "check", "--resolve-reflection", str(bad), timeout_s=60
        )
        assert code == 1, (out, err)
        assert "input.order_idd" in out
    finally:
        await server.stop(0)
