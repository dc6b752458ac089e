"""The `actor` scope keys an entry by everything of the actor a mapped request may read
(review 2, item 2): two credentials of the same subject with different attributes, roles or
on_behalf_of never share an entry. Real gateway, real Redis, real upstream."""

from __future__ import annotations

import orjson
import pytest

from gateway.cache.scope import actor_scope
from gateway.model import Actor
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
