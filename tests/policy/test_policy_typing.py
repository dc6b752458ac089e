"""With a registry, `input` is checked against each matched capability's input schema."""

from __future__ import annotations

import pytest

from policy import Decision, Phase, PolicyLoadError

REFUND = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "reason": {"type": ["string", "null"]},
        "count": {"type": "integer"},
        "items": {
            "type": "array",
            "items": {"$ref": "#/$defs/item"},
        },
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
}
CANCEL = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
}
REGISTRY = {
    "orders.refund": {"input_schema": REFUND, "tags": ["billing"], "side_effect": "write"},
    "orders.cancel": {"input_schema": CANCEL, "tags": ["orders"], "side_effect": "write"},
    "orders.get": {"tags": ["orders"], "side_effect": "none"},
}


def one_rule(when: str, match: str = "{capabilities: [orders.refund]}") -> str:
    return f"policies: [{{name: p, match: {match}, rules: [{{when: {when!r}, effect: deny}}]}}]"


def check_errors(load_policies, text: str) -> list[str]:
    with pytest.raises(PolicyLoadError) as caught:
        load_policies(text, registry=REGISTRY)
    return [issue.message for issue in caught.value.errors]


def test_a_property_missing_from_the_schema_is_a_load_error(load_policies):
    assert check_errors(load_policies, one_rule("input.amonut > 500")) == [
        "no matched capability's input schema has input.amonut (checked: orders.refund)"
    ]


def test_a_property_some_matched_capability_has_is_accepted(load_policies):
    policy_set = load_policies(
        one_rule("has(input.amount) && input.amount > 500", match="{capabilities: ['orders.*']}"),
        registry=REGISTRY,
    )

    assert policy_set.policy_names == ("p",)


def test_a_property_no_matched_capability_has_names_every_capability_checked(load_policies):
    text = one_rule("input.amonut > 1", match="{capabilities: [orders.refund, orders.cancel]}")

    assert check_errors(load_policies, text) == [
        "no matched capability's input schema has input.amonut (checked: orders.cancel, "
        "orders.refund)"
    ]


def test_nested_and_list_element_fields_are_checked(load_policies):
    assert check_errors(load_policies, one_rule("input.items.exists(i, i.skus == 'x')")) == [
        "no matched capability's input schema has input.items[].skus (checked: orders.refund)"
    ]
    assert load_policies(one_rule("input.items.exists(i, i.sku == 'x')"), registry=REGISTRY)


def test_leaf_types_are_checked(load_policies):
    assert check_errors(load_policies, one_rule("input.order_id > 5")) == [
        "found no matching overload for '_>_' applied to '(string, int)'"
    ]
    assert check_errors(load_policies, one_rule("input.count > 2.5")) == [
        "found no matching overload for '_>_' applied to '(int, double)'"
    ]


def test_json_numbers_are_dyn_so_int_and_double_literals_both_work(load_policies):
    policy_set = load_policies(
        one_rule("input.amount > 500 || input.amount > 499.5"), registry=REGISTRY
    )

    assert policy_set.policy_names == ("p",)


def test_nullable_fields_may_be_compared_with_null(load_policies):
    assert load_policies(one_rule("input.reason == null"), registry=REGISTRY)


def test_free_form_objects_are_maps(load_policies):
    assert load_policies(one_rule("input.labels.anything == 'x'"), registry=REGISTRY)


def test_map_style_access_to_input_is_accepted_without_field_checks(load_policies):
    policy_set = load_policies(
        one_rule("'amount' in input && input['amount'] > 1"), registry=REGISTRY
    )

    assert policy_set.policy_names == ("p",)


def test_a_capability_without_input_schema_makes_any_field_acceptable(load_policies):
    policy_set = load_policies(
        one_rule("input.amonut > 1", match="{tags: [billing, orders]}"), registry=REGISTRY
    )

    assert policy_set.policy_names == ("p",)  # orders.get has no schema: input is dyn there


def test_a_capability_without_input_schema_keeps_input_dyn(load_policies):
    policy_set = load_policies(
        one_rule("input.whatever == 1", match="{capabilities: [orders.get]}"), registry=REGISTRY
    )

    assert any("without input_schema: orders.get" in note for note in policy_set.notes)


def test_without_a_registry_input_is_dyn_and_the_set_says_so(load_policies):
    policy_set = load_policies(one_rule("input.amonut > 500"))

    assert policy_set.notes[0].startswith("input is dyn: no capability registry was given")


def test_a_policy_matching_no_registered_capability_is_noted(load_policies):
    policy_set = load_policies(
        one_rule("input.x == 1", match="{capabilities: [billing.*]}"), registry=REGISTRY
    )

    assert any("'p'" in note and "matches no capability" in note for note in policy_set.notes)


def test_context_variables_are_typed(load_policies):
    errors = check_errors(
        load_policies,
        """
        policies:
          - name: p
            phases: [execution]
            rules:
              - {when: "actor.rolez == []", effect: deny}
              - {when: "capability.owner == 'x'", effect: deny}
              - {when: "request.now > 5", effect: deny}
              - {when: "approval.approver.name == 'x'", effect: deny}
              - {when: "surface > 1", effect: deny}
        """,
    )

    assert errors == [
        "actor has no field 'rolez'",
        "capability has no field 'owner'",
        "found no matching overload for '_>_' applied to '(timestamp, int)'",
        "approval.approver has no field 'name'",
        "found no matching overload for '_>_' applied to '(string, int)'",
    ]


def test_checked_policies_evaluate_against_plain_values(load_policies, make_request):
    policy_set = load_policies(
        one_rule("input.items.exists(i, i.sku == 'x') && input.amount > 1"), registry=REGISTRY
    )

    evaluation = policy_set.evaluate_all(
        Phase.INVOCATION, make_request(input={"items": [{"sku": "x"}], "amount": 2})
    )

    assert evaluation.decision is Decision.DENY


def test_fields_split_across_capabilities_are_reported_against_the_closest_schema(load_policies):
    text = one_rule(
        "input.amount > 1 && input.order_id == 'x' && input.nothing == 1",
        match="{capabilities: [orders.refund, orders.cancel]}",
    )

    assert check_errors(load_policies, text) == [
        "no matched capability's input schema has input.nothing (checked: orders.cancel, "
        "orders.refund)"
    ]

    text = one_rule(
        "input.amount > 1 && input.reason == 'x' && input.order_id.size() > 0 && input.count > 1",
        match="{capabilities: [orders.cancel, orders.refund]}",
    )
    assert load_policies(text, registry=REGISTRY)  # refund has all four

    schemas = {
        "a.one": {"input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "a.two": {"input_schema": {"type": "object", "properties": {"y": {"type": "string"}}}},
    }
    with pytest.raises(PolicyLoadError) as caught:
        load_policies(
            one_rule("input.x == input.y", match="{capabilities: ['a.*']}"), registry=schemas
        )
    (issue,) = caught.value.errors
    assert issue.message == (
        "input.y is not in the input schema of a.one, and no matched capability has every "
        "input field this uses (checked: a.one, a.two)"
    )
