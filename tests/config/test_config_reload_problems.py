"""A refused reload logs every problem at its file:line, as a refused start does."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from gateway.config.loader import load_settings
from gateway.process.serve import start

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "config" / "broken"

pytestmark = pytest.mark.integration


def _copy(case: str, into: Path) -> Path:
    """A corpus case in a private directory (the reload edits it)."""
    shutil.copytree(BROKEN / "policies", into / "policies")
    text = (
        (BROKEN / case)
        .read_text()
        .replace("../../../examples/orders/orders.pb", str(ROOT / "examples/orders/orders.pb"))
    )
    path = into / "gateway.yaml"
    path.write_text(text)
    return path


async def test_a_refused_reload_logs_every_problem_with_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy("00-valid.yaml", tmp_path)
    gw = await start(load_settings(path))
    try:
        good = gw.holder.current.revision
        broken = _copy("16-snapshot-and-policy-problems.yaml", tmp_path / "next")
        path.write_text(broken.read_text())
        shutil.copytree(tmp_path / "next" / "policies", tmp_path / "policies", dirs_exist_ok=True)
        with caplog.at_level(logging.ERROR, logger="capgate"):
            await gw.reload(load_settings(path))
        assert gw.holder.current.revision == good  # the last good snapshot stays
        (record,) = [r for r in caplog.records if "reload refused" in r.getMessage()]
        text = record.getMessage()
        assert "(and " not in text
        assert f"{path}:23: capabilities[0].policies[0]: capability orders.get: " in text
        assert f"{path}:35: capabilities[1].policies[1]: capability orders.cancel: " in text
        policies = tmp_path / "policies"
        assert f"{policies}/cel-type-error/p.yaml:4:24: string-vs-number/rules[0]: " in text
        assert f"{policies}/proto-input-field/p.yaml:6:20: misspelt-field/rules[0]: " in text
        assert "4 problem(s)" in text
    finally:
        await gw.stop(0.1)


def test_the_located_configs_kept_for_reports_are_bounded(tmp_path: Path) -> None:
    """Each load records where its values are, under its revision; only the last KEEP stay."""
    from gateway.config import places  # noqa: PLC0415

    path = _copy("00-valid.yaml", tmp_path)
    base = path.read_text()
    revisions = []
    for i in range(places.KEEP + 3):
        path.write_text(base + f"# edit {i}\n")
        revisions.append(load_settings(path).revision)
    assert len(set(revisions)) == len(revisions)
    assert [places.places_of(r) is not None for r in revisions] == [False] * 3 + [
        True
    ] * places.KEEP


def test_a_snapshot_problem_of_settings_built_by_hand_has_its_path_but_no_line() -> None:
    from gateway.config.settings import Settings  # noqa: PLC0415
    from gateway.pipeline.snapshot import SnapshotError, SnapshotProblem  # noqa: PLC0415
    from gateway.process.load import located  # noqa: PLC0415

    settings = Settings(listeners=(), upstreams={}, capabilities=(), revision="by-hand")
    error = SnapshotError([SnapshotProblem(("capabilities", 0, "method"), "no such method")])
    (problem,) = located(settings, error).problems
    assert str(problem) == "<config>: capabilities[0].method: no such method"
