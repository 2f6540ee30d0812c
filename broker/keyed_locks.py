"""One lock per key (a group id, a transactional id) that exists only while someone holds or awaits it.

Guarantees: holders of one key are serialized, in trio.Lock's FIFO order; different keys never wait for each other.
A key's lock is created by its first ``async with locks(key)`` and dropped when the last holder or waiter leaves,
so memory is bounded by the requests in flight, never by the number of keys ever named (a client naming a million
unknown ids leaves nothing behind). Taking a free lock does not yield to the scheduler (``trio.Lock.acquire`` always
does, which costs every request an extra scheduler pass); callers that loop over many keys checkpoint themselves.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

import trio

K = TypeVar("K", bound=Hashable)


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        #: Holders and waiters: the entry goes when this drops to zero.
        self.users = 0


class KeyedLocks(Generic[K]):
    """``async with locks(key):`` holds ``key``'s lock."""

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def __len__(self) -> int:
        """Keys whose lock is held or awaited now."""
        return len(self._entries)

    def __call__(self, key: K) -> _Held[K]:
        return _Held(self, key)

    def _enter(self, key: K) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        return entry

    def _leave(self, key: K, entry: _Entry) -> None:
        entry.users -= 1
        if entry.users == 0:
            del self._entries[key]


class _Held(Generic[K]):
    __slots__ = ("_entry", "_key", "_locks")

    def __init__(self, locks: KeyedLocks[K], key: K) -> None:
        self._locks = locks
        self._key = key
        self._entry: _Entry | None = None

    async def __aenter__(self) -> None:
        entry = self._locks._enter(self._key)
        try:
            try:
                entry.lock.acquire_nowait()
            except trio.WouldBlock:
                await entry.lock.acquire()
        except BaseException:
            self._locks._leave(self._key, entry)
            raise
        self._entry = entry

    async def __aexit__(self, *exc_info: object) -> None:
        entry = self._entry
        assert entry is not None
        self._entry = None
        entry.lock.release()
        self._locks._leave(self._key, entry)
