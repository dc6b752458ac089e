"""The default JSON codec: orjson when it is installed (`pip install capgate-client[fast]`),
else the standard library, with the same compact UTF-8 bytes out. Every client takes
`json_loads=`/`json_dumps=` to use another."""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None  # type: ignore[assignment]


def _std_loads(data: bytes | str) -> Any:
    return json.loads(data)


def _std_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """Parse JSON text (bytes or str)."""
    return orjson.loads(data) if orjson is not None else _std_loads(data)


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes."""
    return orjson.dumps(value) if orjson is not None else _std_dumps(value)
