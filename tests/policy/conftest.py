"""Shared helpers for the policy engine's tests: write policies, build requests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from policy import EvalRequest, PolicySet, load_policy_set

NOW = datetime(2025, 3, 4, 10, 0, tzinfo=UTC)
"""A Tuesday, 11:00 in Berlin."""

LoadPolicies = Callable[..., PolicySet]
MakeRequest = Callable[..., EvalRequest]


@pytest.fixture
def write_policies(tmp_path: Path) -> Callable[..., Path]:
    """Write `name=yaml text` files into a fresh directory and return it."""

    def write(**files: str) -> Path:
        directory = tmp_path / "policies"
        directory.mkdir(exist_ok=True)
        for name, text in files.items():
            (directory / name.replace("__", ".")).write_text(textwrap.dedent(text), "utf-8")
        return directory

    return write


@pytest.fixture
def load_policies(write_policies: Callable[..., Path]) -> LoadPolicies:
    """Load one policy file's text (dedented) as a set; keyword options go to the loader."""

    def load(text: str, **options: Any) -> PolicySet:
        return load_policy_set(write_policies(policies__yaml=text), **options)

    return load


def _request(
    capability: str = "orders.refund",
    *,
    roles: Sequence[str] = ("support",),
    kind: str = "user",
    tags: Sequence[str] = ("orders",),
    side_effect: str = "write",
    policies: Sequence[str] = (),
    input: Any = None,
    approval: Mapping[str, Any] | None = None,
    now: datetime = NOW,
    surface: str = "mcp",
    actor_id: str = "u-alice",
) -> EvalRequest:
    return EvalRequest(
        actor={
            "id": actor_id,
            "kind": kind,
            "issuer": "https://idp.example.com",
            "roles": list(roles),
        },
        capability={
            "id": capability,
            "tags": list(tags),
            "side_effect": side_effect,
            "risk": "high",
        },
        capability_policies=tuple(policies),
        surface=surface,
        input=input,
        now=now,
        approval=approval,
    )


@pytest.fixture
def make_request() -> MakeRequest:
    """Build an `EvalRequest` for a support user calling `orders.refund` (override any part)."""
    return _request
