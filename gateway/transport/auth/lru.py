"""A bounded LRU map for verified credentials (§11: skip repeated signature verification).

Only successful verifications are stored, so a caller cannot grow it with garbage tokens beyond
what a valid credential costs them; its size is bounded all the same.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("an LRU cache needs room for at least one entry")
        self._max = max_entries
        self._data: OrderedDict[K, V] = OrderedDict()
        # Authenticators are normally called from one event loop, but nothing stops a caller
        # from using them from worker threads; the lock keeps move/evict sequences consistent.
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)
