"""The `actor` scope keys an entry by everything of the actor a mapped request may read
(review 2, item 2): two credentials of the same subject with different attributes, roles or
on_behalf_of never share an entry. Real gateway, real Redis, real upstream."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.config.cachescope import actor_scope, reads_actor, uncovered_reads
from gateway.model import Actor
from gateway.process.load import load_everything
from gateway.upstream.channels import ChannelPool
from tests.cache.conftest import environ_for
from tests.cache.test_cache_config import _config, _problems
from tests.cache.test_cache_flow import invoke, output
from tests.gateway.harness import Env

pytestmark = [pytest.mark.integration]


async def test_one_subject_with_another_customer_attribute_gets_its_own_entry(env: Env) -> None:
    first = output(await invoke(env, "orders.mine", {}, "alice", customer="c-1"))
    assert {o["customer_id"] for o in first["orders"]} == {"c-1"}
    other = output(await invoke(env, "orders.mine", {}, "alice", customer="c-2"))
    assert {o["customer_id"] for o in other["orders"]} == {"c-2"}  # not c-1's entry
    assert await env.upstream_calls("ListOrders") == 2
    again = await invoke(env, "orders.mine", {}, "alice", customer="c-1")
    assert orjson.loads(again.completed.output_json) == first  # its own entry: a hit
    assert await env.upstream_calls("ListOrders") == 2


def test_every_part_of_the_actor_changes_the_scope_value() -> None:
    base = Actor(
        id="agent-1",
        kind="agent",
        issuer="https://idp",
        roles=("viewer", "admin"),
        attributes={"customer": "c-1", "tenant": "t"},
        on_behalf_of="alice",
    )
    same = Actor(
        id="agent-1",
        kind="agent",
        issuer="https://idp",
        roles=("admin", "viewer"),  # order does not matter
        attributes={"tenant": "t", "customer": "c-1"},
        on_behalf_of="alice",
    )
    assert actor_scope(base) == actor_scope(same)
    variants = [
        Actor(**{**_fields(base), "id": "agent-2"}),
        Actor(**{**_fields(base), "issuer": "https://other"}),
        Actor(**{**_fields(base), "roles": ("viewer",)}),
        Actor(**{**_fields(base), "attributes": {"customer": "c-2", "tenant": "t"}}),
        Actor(**{**_fields(base), "on_behalf_of": "bob"}),
        Actor(id="https://idp" + "agent-1", kind="agent"),  # no (issuer, id) concatenation
    ]
    values = {actor_scope(a) for a in variants}
    assert len(values) == len(variants) and actor_scope(base) not in values


def _fields(actor: Actor) -> dict[str, object]:
    return {
        "id": actor.id,
        "kind": actor.kind,
        "issuer": actor.issuer,
        "roles": actor.roles,
        "attributes": actor.attributes,
        "on_behalf_of": actor.on_behalf_of,
    }


async def test_a_shared_cache_over_a_mapper_that_reads_actor_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    # orders.mine builds customer_id from actor.attributes.customer: shared would hand one
    # customer's orders to another.
    old = "    cache: {ttl: 1m}\n  - id: orders.list"
    path = _config(tmp_path, old, "    cache: {ttl: 1m, scope: shared}\n  - id: orders.list")
    (problem,) = await _problems(path)
    line = _mine_cache_line(path)
    assert problem == (
        f"{path}:{line}: capabilities[5].cache.scope: a shared cache cannot serve a map_input "
        "that reads actor: use scope actor or a key that covers what the mapping reads"
    ), problem


def _mine_cache_line(path: Path) -> int:
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "id: orders.mine" in line)
    return next(
        i for i, line in enumerate(lines[start:], start=start + 1) if "scope: shared" in line
    )


@pytest.mark.parametrize(
    ("text", "reads"),
    [
        ("Request{customer_id: actor.attributes.customer}", True),
        ("Request{customer_id: 'x' + (actor).id}", True),
        ("Request{customer_id: input.actor}", False),
        ("Request{customer_id: 'actor'}", False),
        ('Request{customer_id: "it\\"s the actor"}', False),
        ("Request{customer_id: actor_id}", False),
        ("// actor.id\nRequest{customer_id: input.x}", False),
        ("Request{\n // the caller's id\n customer_id: actor.id, note: 'x'}", True),
    ],
)
def test_reads_actor_sees_the_variable_not_literals_or_fields(text: str, reads: bool) -> None:
    assert reads_actor(text) is reads


async def test_a_scope_key_that_never_names_what_the_mapper_reads_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    # orders.mine maps customer_id from actor.attributes.customer; entries keyed by the tenant
    # alone would hand one customer's orders to another customer of the same tenant.
    old = "    cache: {ttl: 1m}\n  - id: orders.list"
    new = (
        "    cache:\n      ttl: 1m\n      scope: {key: actor.attributes.tenant}\n"
        "  - id: orders.list"
    )
    path = _config(tmp_path, old, new)
    (problem,) = await _problems(path)
    lines = path.read_text().splitlines()
    start = next(i for i, text in enumerate(lines) if "id: orders.mine" in text)
    line = next(
        i
        for i, text in enumerate(lines[start:], start=start + 1)
        if "key: actor.attributes.tenant" in text
    )
    assert problem == (
        f"{path}:{line}: capabilities[5].cache.scope.key: map_input reads "
        "actor.attributes.customer, which the scope key never names: callers with the same "
        "key would share answers to different requests; use scope actor or a key that covers "
        "what the mapping reads"
    ), problem


@pytest.mark.parametrize(
    "key",
    [
        "actor.attributes.customer",
        "actor.attributes.tenant + '/' + actor.attributes.customer",
        "actor.id + ':' + actor.attributes.customer",
    ],
)
async def test_a_scope_key_that_names_what_the_mapper_reads_loads(tmp_path: Path, key: str) -> None:
    old = "    cache: {ttl: 1m}\n  - id: orders.list"
    new = f'    cache:\n      ttl: 1m\n      scope: {{key: "{key}"}}\n  - id: orders.list'
    path = _config(tmp_path, old, new)
    assert await _loads(path)


async def _loads(path: Path) -> bool:
    environ = environ_for("127.0.0.1:1", "redis://127.0.0.1:1/0", str(path.parent))
    pool = ChannelPool()
    try:
        await load_everything(path, pool, environ=environ, bind=False)
    finally:
        await pool.close()
    return True


CUSTOMER = "Request{customer_id: actor.attributes.customer}"


@pytest.mark.parametrize(
    ("mapper", "key", "missing"),
    [
        (CUSTOMER, "actor.attributes.tenant", ["actor.attributes.customer"]),
        (CUSTOMER, "actor.attributes.customer", []),
        (CUSTOMER, "actor.attributes['customer']", []),  # a plain literal index is a field
        (CUSTOMER, "actor.attributes.tenant + '/' + actor.attributes.customer", []),
        ("Request{customer_id: actor.id}", "actor.attributes.tenant", ["actor.id"]),
        ("Request{customer_id: actor.id.lowerAscii()}", "actor.id", []),
        ("Request{customer_id: (actor).id}", "actor.id", ["actor"]),  # the whole actor
        ("Request{customer_id: actor.attributes['customer']}", "actor.attributes.customer", []),
        (
            "Request{c: actor.attributes[input.which]}",
            "actor.attributes.customer",
            ["actor.attributes"],
        ),
        ("Request{customer_id: input.actor}", "actor.attributes.tenant", []),
        ("Request{customer_id: 'actor.id'}", "actor.attributes.tenant", []),
        (
            "Request{a: actor.id, b: actor.attributes.customer}",
            "actor.id",
            ["actor.attributes.customer"],
        ),
        # Comments hide nothing and name nothing: an apostrophe in one is no string literal.
        (
            "Request{\n  // the caller's customer\n"
            "  customer_id: actor.attributes.customer,\n  note: 'x'}",
            "actor.attributes.tenant",
            ["actor.attributes.customer"],
        ),
        (
            CUSTOMER,
            "actor.attributes.tenant // actor.attributes.customer",
            ["actor.attributes.customer"],
        ),
        # A key gets credit only for field paths it uses as values.
        (CUSTOMER, "actor.attributes['tenant']", ["actor.attributes.customer"]),
        (CUSTOMER, "(actor).attributes.tenant", ["actor.attributes.customer"]),
        (
            CUSTOMER,
            "actor.attributes.exists(k, k == 'customer') ? 'a' : 'b'",
            ["actor.attributes.customer"],
        ),
        (CUSTOMER, "actor.attributes[request.surface]", ["actor.attributes.customer"]),
        (
            CUSTOMER,
            "[actor.id].map(actor, actor.attributes.customer)[0]",
            ["actor.attributes.customer"],
        ),
        # A macro binding the name makes the mapping read the whole actor.
        ("Request{ids: input.items.map(actor, actor.id)}", "actor.id", ["actor"]),
    ],
)
def test_uncovered_reads_names_each_actor_field_the_key_leaves_out(
    mapper: str, key: str, missing: list[str]
) -> None:
    assert uncovered_reads(mapper, key) == missing
