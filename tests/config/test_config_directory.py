"""A directory config: every visible *.yaml merged, as a Kubernetes ConfigMap mounts it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, load_settings


def split(base: dict[str, Any], directory: Path) -> None:
    """Write base as three files; capabilities are split across two of them."""
    first = {k: base[k] for k in ("version", "listeners", "upstreams")}
    first["capabilities"] = base["capabilities"][:1]
    (directory / "10-core.yaml").write_text(yaml.safe_dump(first))
    (directory / "20-more.yaml").write_text(
        yaml.safe_dump({"capabilities": base["capabilities"][1:]})
    )
    (directory / "30-audit.yaml").write_text(yaml.safe_dump({"audit": {"strict": True}}))


def test_files_merge_lists_concatenated_and_mappings_merged(base, env, config_dir):
    split(base, config_dir)
    (config_dir / "notes.txt").write_text("not yaml: [")
    (config_dir / ".hidden.yaml").write_text("not: valid: [")
    settings = load_settings(config_dir, environ=env)
    assert [c.id for c in settings.capabilities] == ["things.get", "things.make"]
    assert settings.audit.strict is True
    assert settings.upstreams["things"].descriptor_set == str(config_dir / "things.pb")
    assert settings.source == str(config_dir)


def test_a_key_defined_in_two_files_is_an_error_naming_both(base, env, config_dir):
    split(base, config_dir)
    (config_dir / "40-again.yaml").write_text("audit:\n  strict: false\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config_dir, environ=env)
    [problem] = info.value.problems
    assert problem.file == str(config_dir / "40-again.yaml")
    assert (problem.path_in_file, problem.line) == ("audit.strict", 2)
    assert problem.message == "duplicate key (first defined at 30-audit.yaml:2)"


def test_problems_point_into_the_file_that_holds_them(base, env, config_dir):
    split(base, config_dir)
    (config_dir / "20-more.yaml").write_text(
        "capabilities:\n  - id: things.more\n    upstream: nowhere\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(config_dir, environ=env)
    where = {(Path(p.file or "").name, p.path_in_file, p.line) for p in info.value.problems}
    assert ("20-more.yaml", "capabilities[1].upstream", 3) in where
    assert ("20-more.yaml", "capabilities[1]", 2) in where  # missing required keys


def test_symlinked_configmap_layout_loads_through_the_visible_names(base, env, config_dir):
    data = config_dir / "..2026_01_01_00_00_00.000000001"
    data.mkdir()
    (data / "gateway.yaml").write_text(yaml.safe_dump(base))
    os.symlink(data.name, config_dir / "..data")
    os.symlink("..data/gateway.yaml", config_dir / "gateway.yaml")
    settings = load_settings(config_dir, environ=env)
    assert len(settings.capabilities) == 2


def test_an_empty_directory_is_an_error(tmp_path, env):
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, environ=env)
    assert [p.message for p in info.value.problems] == ["no *.yaml files in directory"]
