"""Fixtures for the capgate_client tests: the shared stack (skipped, with the reason, when
`.run/stack.json` or $CAPGATE_STACK is absent) and clients on it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from capgate_client import AsyncAdminClient, AsyncClient
from clientkit import NO_STACK, STACK_PATH


@pytest.fixture(scope="session")
def stack() -> dict[str, Any]:
    if not STACK_PATH.exists():
        pytest.skip(NO_STACK)
    return json.loads(STACK_PATH.read_text())


@pytest.fixture
async def alice(stack: dict[str, Any]) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(stack["agents"], token=stack["tokens"]["alice"], timeout=10) as client:
        yield client


@pytest.fixture
async def bob(stack: dict[str, Any]) -> AsyncIterator[AsyncAdminClient]:
    async with AsyncAdminClient(stack["admin"], token=stack["tokens"]["bob"], timeout=10) as client:
        yield client
