"""A grant's constraint and amount (gateway/pipeline/grantexpr.py): compiled by the real CEL
engine, type-checked against the input schema of every covered capability, evaluated."""

from __future__ import annotations

import pytest

from gateway.errors import CapabilityError, Code
from gateway.pipeline.grantexpr import GrantExprError, compile_grant_exprs
from gateway.pipeline.snapshot import Snapshot

ACTOR = {"id": "alice", "kind": "user", "issuer": "test-idp", "roles": ["agent"], "attributes": {}}
REFUND = {"order_id": "o-1", "amount": 120.5, "currency": "EUR"}


def _error(snapshot: Snapshot, ids: list[str], constraint: str, amount: str = "") -> GrantExprError:
    with pytest.raises(GrantExprError) as caught:
        compile_grant_exprs(snapshot, ids, constraint, amount)
    return caught.value


def test_a_constraint_over_input_and_actor_covers_what_it_says(snapshot: Snapshot) -> None:
    exprs = compile_grant_exprs(
        snapshot, ["pay.refund"], 'input.currency == "EUR" && "agent" in actor.roles', ""
    )
    assert exprs.covers(REFUND, ACTOR)
    assert not exprs.covers({**REFUND, "currency": "USD"}, ACTOR)
    assert not exprs.covers(REFUND, {**ACTOR, "roles": []})
    assert exprs.amount(REFUND) is None


def test_no_constraint_covers_every_input(snapshot: Snapshot) -> None:
    assert compile_grant_exprs(snapshot, ["pay.refund"], "", "").covers(REFUND, ACTOR)


def test_a_constraint_that_fails_to_evaluate_covers_nothing(snapshot: Snapshot) -> None:
    exprs = compile_grant_exprs(snapshot, ["pay.refund"], 'input.currency == "EUR"', "")
    assert not exprs.covers({"order_id": "o-1", "amount": 1}, ACTOR)  # no currency: an error


def test_the_amount_is_a_finite_number_at_least_zero(snapshot: Snapshot) -> None:
    exprs = compile_grant_exprs(snapshot, ["pay.refund"], "", "input.amount")
    assert exprs.amount(REFUND) == 120.5
    assert exprs.amount({**REFUND, "amount": 3}) == 3.0
    for bad in (-1, float("inf")):
        with pytest.raises(CapabilityError) as caught:
            exprs.amount({**REFUND, "amount": bad})
        assert caught.value.code is Code.POLICY_FAILED
    with pytest.raises(CapabilityError):
        exprs.amount({"order_id": "o-1"})  # the field is missing


def test_a_field_no_input_has_is_refused_at_its_position(snapshot: Snapshot) -> None:
    error = _error(snapshot, ["pay.refund"], 'input.currency == "EUR" &&\n  input.iban != ""')
    assert (error.field, error.position) == ("constraint", "2:8")
    assert "input.iban" in error.message


def test_a_tag_grant_is_checked_against_every_capability(snapshot: Snapshot) -> None:
    # pay.refund has `currency`, pay.credit has not: one schema accepting it is not enough.
    error = _error(snapshot, ["pay.refund", "pay.credit"], 'input.currency == "EUR"')
    assert (error.field, error.position) == ("constraint", "1:6")
    assert "pay.credit" in error.message
    both = compile_grant_exprs(snapshot, ["pay.refund", "pay.credit"], "input.amount < 10.0", "")
    assert both.covers({"order_id": "o", "amount": 5}, ACTOR)


def test_a_syntax_error_names_line_and_column(snapshot: Snapshot) -> None:
    error = _error(snapshot, ["pay.refund"], "input.amount >")
    assert (error.field, error.position) == ("constraint", "1:15")
    assert "Syntax error" in error.message


def test_only_input_and_actor_are_readable(snapshot: Snapshot) -> None:
    error = _error(snapshot, ["pay.refund"], 'request.metadata["x"] == "y"')
    assert error.position == "1:8"  # where cel-cpp places a selection: its dot
    assert "only `input` and `actor`" in error.message


def test_types_are_checked(snapshot: Snapshot) -> None:
    error = _error(snapshot, ["pay.refund"], "input.order_id")
    assert error.field == "constraint"
    assert "must be bool" in error.message
    error = _error(snapshot, ["pay.refund"], "", "input.order_id")
    assert error.field == "amount"
    assert "must be int or uint or double" in error.message
    error = _error(snapshot, ["pay.refund"], "", "input.nope + 1.0")
    assert (error.field, error.position) == ("amount", "1:6")


def test_an_unknown_capability_is_an_error(snapshot: Snapshot) -> None:
    error = _error(snapshot, ["no.such"], "")
    assert error.field == "capability"


def test_compiled_once_per_snapshot(snapshot: Snapshot) -> None:
    first = compile_grant_exprs(snapshot, ["pay.refund"], "input.amount > 1.0", "input.amount")
    again = compile_grant_exprs(snapshot, ["pay.refund"], "input.amount > 1.0", "input.amount")
    assert first is again
