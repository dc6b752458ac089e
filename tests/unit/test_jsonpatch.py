"""RFC 6902 patches of approver edits (gateway/values/jsonpatch.py): the patch between any two
JSON values turns the first into the second, pointers escape `~` and `/`, and a redacted field
stays redacted in the patch of an edited approval (convert.patch_json)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.model import Actor, RedactRule
from gateway.state.approvals.convert import patch_json
from gateway.state.approvals.records import ApprovalRecord
from gateway.values import jsonpatch
from gateway.values.redact import Redactor

_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=5)
_json: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def _json_text(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_the_patch_of_two_values_turns_the_first_into_the_second(a: Any, b: Any) -> None:
    patch = jsonpatch.diff(a, b)
    assert jsonpatch.apply(a, patch) == b
    if _json_text(a) == _json_text(b):  # equal as JSON (False and 0 differ, as 1 and 1.0)
        assert patch == []


def test_pointers_escape_tilde_and_slash_and_types_count() -> None:
    patch = jsonpatch.diff({"a/b": 1, "c~d": True, "n": 1}, {"a/b": 2, "c~d": True, "n": 1.0})
    assert patch == [
        {"op": "replace", "path": "/a~1b", "value": 2},
        {"op": "replace", "path": "/n", "value": 1.0},
    ]
    assert jsonpatch.diff({"x": 1}, {"y": 1}) == [
        {"op": "remove", "path": "/x"},
        {"op": "add", "path": "/y", "value": 1},
    ]


def test_an_edited_secret_shows_as_changed_and_never_in_clear() -> None:
    record = ApprovalRecord(
        id="apr_1",
        capability_id="payments.send",
        capability_digest="d",
        surface="grpc",
        requester=Actor(id="agent", issuer="iss", kind="agent"),
        input={"amount": 900, "iban": "DE00 1111"},
        input_hash="h2",
        created_at=1.0,
        expires_at=2.0,
        edited=True,
        original_input={"amount": 1200, "iban": "DE00 2222"},
        original_input_hash="h1",
    )
    redactor = Redactor((RedactRule(path="$.iban", action="mask"),))
    shown = patch_json(record, redactor)
    assert "1111" not in shown and "2222" not in shown
    assert '{"op":"replace","path":"/amount","value":900}' in shown
    assert '"path":"/iban"' in shown  # changed, shown masked
    assert patch_json(record, None).count("DE00") == 1  # unredacted: only the new value
    dropped = patch_json(record, Redactor((RedactRule(path="$.iban", action="drop"),)))
    assert '{"op":"replace","path":"/iban","value":"REDACTED"}' in dropped
