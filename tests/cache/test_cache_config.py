"""Load-time refusals of cache and map_input settings (docs/cache.md), at file:line, by the one
loader `capgate serve` and `capgate config check` share (gateway/process/load.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.config.problems import ConfigError
from gateway.process.load import load_everything
from gateway.upstream.channels import ChannelPool
from tests.cache.conftest import HERE, environ_for


def _config(tmp_path: Path, old: str, new: str) -> Path:
    shutil.copy(HERE / "policies.yaml", tmp_path / "policies.yaml")
    text = (HERE / "gateway.yaml").read_text()
    assert text.count(old) == 1
    (tmp_path / "gateway.yaml").write_text(text.replace(old, new))
    return tmp_path / "gateway.yaml"


def _line_of(path: Path, needle: str) -> int:
    """The first line holding `needle`."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if needle in line)


async def _problems(path: Path) -> list[str]:
    environ = environ_for("127.0.0.1:1", "redis://127.0.0.1:1/0", str(path.parent))
    pool = ChannelPool()
    try:
        with pytest.raises(ConfigError) as caught:
            await load_everything(path, pool, environ=environ, bind=False)
    finally:
        await pool.close()
    return [str(p) for p in caught.value.problems]


MAPPER = (
    'map_input: "Request{customer_id: actor.attributes.customer, '
    'page_size: has(input.size) ? input.size : 10}"'
)


@pytest.mark.parametrize(
    ("mapper", "message"),
    [
        ("Request{customer: actor.id}", "undefined field 'customer'"),
        ("Request{page_size: actor.id}", "expected type of field 'page_size' is 'int'"),
        ("Request{customer_id: input.sized}", "undefined field 'sized'"),
        ("{'customer_id': actor.id}", "must build the upstream request as Request{...}"),
    ],
)
async def test_a_mapper_that_does_not_type_check_is_refused_at_its_line(
    tmp_path: Path, mapper: str, message: str
) -> None:
    path = _config(tmp_path, MAPPER, f'map_input: "{mapper}"')
    (problem,) = await _problems(path)
    line = _line_of(path, "map_input:")
    assert problem.startswith(f"{path}:{line}: capabilities[5].map_input: "), problem
    assert message in problem


async def test_a_cache_on_a_write_capability_is_refused_at_its_line(tmp_path: Path) -> None:
    old = (
        "    side_effect: read\n    risk: low\n    expose: {agent: true, mcp: true}\n"
        "    cache: {ttl: 1m}\n"
    )
    path = _config(tmp_path, old, old.replace("side_effect: read", "side_effect: write"))
    (problem,) = await _problems(path)
    line = _line_of(path, "cache: {ttl: 1m}")
    assert problem == (
        f"{path}:{line}: capabilities[0].cache: only capabilities with side_effect none or read"
        " are cached, not write"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("actor.roles", "must be a string or an int"),
        ("actor.nope", "undefined field 'nope'"),
        ("input.order_id", "undeclared reference to 'input.order_id'"),
    ],
)
async def test_a_scope_key_that_does_not_type_check_is_refused_at_its_line(
    tmp_path: Path, key: str, message: str
) -> None:
    old = "scope: {key: actor.attributes.tenant}"
    path = _config(tmp_path, old, f"scope: {{key: {key}}}")
    (problem,) = await _problems(path)
    line = _line_of(path, f"scope: {{key: {key}}}")
    assert problem.startswith(f"{path}:{line}: capabilities[2].cache.scope: "), problem
    assert message in problem


async def test_a_procedure_mapper_is_checked_against_its_map_input_schema(tmp_path: Path) -> None:
    old = "page_size: has(input.size) ? input.size : 20}"
    path = _config(tmp_path, old, "page_size: 'twenty'}")
    (problem,) = await _problems(path)
    line = _line_of(path, "page_size: 'twenty'}")
    assert problem.startswith(f"{path}:{line}: capabilities[6].map_input: "), problem
    assert "expected type of field 'page_size' is 'int'" in problem


async def test_map_input_schema_needs_a_procedure_mapper(tmp_path: Path) -> None:
    old = "    cache: {ttl: 1m, scope: shared}\n    redact:"
    schema = "    map_input_schema: {type: object}\n"
    path = _config(tmp_path, old, schema + old)
    (problem,) = await _problems(path)
    line = _line_of(path, "map_input_schema: {type: object}")
    assert problem == f"{path}:{line}: capabilities[1].map_input_schema: only used with map_input"
