"""Each fault test gets its own stack (tests/faults/kit.py): its own Redis, upstream process and
gateway, so that killing one never disturbs another test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.faults.kit import Stack


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    own = Stack.create(tmp_path)
    try:
        yield own
    finally:
        await own.close()
