"""Go-style durations and capability id globs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from policy.durations import format_duration, parse_duration
from policy.globs import compile_globs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("250ms", timedelta(milliseconds=250)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
    ],
)
def test_go_durations_parse(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "1d", "h", "1 h", "-5m", "0s", "1h-5m", "5"])
def test_malformed_or_non_positive_durations_are_rejected(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(hours=4), "4h"),
        (timedelta(milliseconds=1500), "1s500ms"),
        (timedelta(0), "0s"),
    ],
)
def test_durations_format_in_go_style(value, text):
    assert format_duration(value) == text


@pytest.mark.parametrize(
    ("patterns", "capability", "matches"),
    [
        (["orders.get"], "orders.get", True),
        (["orders.get"], "orders.getter", False),
        (["orders.*"], "orders.refund", True),
        (["orders.*"], "orders.refund.partial", False),
        (["orders.*"], "orders", False),
        (["*.refund"], "orders.refund", True),
        (["*.refund"], "admin.orders.refund", False),
        (["admin.**"], "admin.orders.purge", True),
        (["admin.**"], "admin.purge", True),
        (["admin.**"], "admin", False),
        (["**.purge"], "admin.orders.purge", True),
        (["**"], "anything.at.all", True),
        (["orders.*", "admin.**"], "admin.x", True),
        (["a+b.*"], "a+b.c", True),
        (["a+b.*"], "aab.c", False),
    ],
)
def test_star_matches_one_segment_and_double_star_one_or_more(patterns, capability, matches):
    assert bool(compile_globs(patterns).match(capability)) is matches
