"""The container image, checked without a Docker engine: the Dockerfile's structure, and that
its build context holds everything `pip install .` needs. (Its entrypoint is run for real, from
the project venv, by test_helm_reload.py.)"""

from __future__ import annotations

import re
import tomllib

from tests.helm.chart import ROOT
from tests.helm.dockerfile import entrypoint, ignored, parse


def test_image_is_multi_stage_on_slim_python_311() -> None:
    stages = parse()
    assert len(stages) >= 2
    runtime = stages[-1]
    for stage in stages:
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", stage.base)
    # The runtime stage gets the built venv from an earlier stage, not by building it itself.
    copies = [i.args for i in runtime.all("COPY")]
    builders = {s.name for s in stages[:-1]}
    assert any(f"--from={name}" in c for c in copies for name in builders)
    assert not runtime.all("ADD")
    assert all("pip install" not in i.args for i in runtime.all("RUN"))


def test_image_runs_as_a_numeric_non_root_user() -> None:
    (user,) = parse()[-1].all("USER")[-1:]
    uid, _, gid = user.args.partition(":")
    # Numeric, so Kubernetes can enforce runAsNonRoot without reading the image's passwd file.
    assert uid.isdigit()
    assert int(uid) > 0
    assert not gid or (gid.isdigit() and int(gid) > 0)
    chart_values = (ROOT / "helm/capgate/values.yaml").read_text()
    assert f"runAsUser: {uid}\n" in chart_values


def test_no_remote_add_and_no_downloads_in_the_build() -> None:
    for stage in parse():
        for add in stage.all("ADD"):
            assert "://" not in add.args, f"line {add.line}: ADD from a URL"
        for run in stage.all("RUN"):
            assert not re.search(r"\b(curl|wget)\b", run.args), f"line {run.line}"


def test_entrypoint_is_exec_form_capgate_serve_on_the_mounted_config_dir() -> None:
    assert entrypoint(parse()[-1]) == ["capgate", "serve", "--config", "/etc/capgate"]


def test_runtime_never_writes_bytecode_to_the_read_only_root() -> None:
    runtime = parse()[-1]
    env = " ".join(i.args for i in runtime.all("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    # Compiled at build time instead, valid whatever the copied files' timestamps.
    build_runs = " ".join(i.args for s in parse()[:-1] for i in s.all("RUN"))
    assert "compileall" in build_runs
    assert "unchecked-hash" in build_runs


def test_build_context_carries_every_package_the_project_installs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = ["pyproject.toml", project["project"]["readme"]]
    needed += [
        pattern.rstrip("*")
        for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]
    ]
    copied = " ".join(i.args for s in parse()[:-1] for i in s.all("COPY"))
    for item in needed:
        assert (ROOT / item).exists(), item
        assert not ignored(item), f".dockerignore leaves out {item}"
        assert item in copied.split(), f"the build stage never copies {item}"
    assert ignored("gateway/__pycache__/serve.cpython-311.pyc")
    assert ignored(".venv/bin/python")
    assert ignored("tests/conftest.py")
