"""Deadlines of many keys, earliest first: the timer queue of the group and transaction coordinators (Kafka keeps
such timers in a timing wheel, its SystemTimer / DelayedOperationPurgatory; a binary heap gives the same bound here).

Guarantees:
- Each key has at most one live deadline; ``schedule`` replaces it and ``cancel`` removes it, both O(log n) or O(1).
  Replaced and cancelled entries are skipped lazily when they reach the top, and the heap is rebuilt once they
  outnumber the live ones, so it never holds more than ``2 * live + COMPACT_SLACK`` entries.
- ``pop_due`` hands out due keys in deadline order, each once per ``schedule``; ``next_deadline`` is O(1) amortized.
  So a timer task costs nothing per key that has no deadline or a later one: idle keys are free.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: Stale entries tolerated beyond the live ones before the heap is rebuilt (keeps tiny heaps from rebuilding often).
COMPACT_SLACK = 64


class DeadlineHeap(Generic[K]):
    """Keys with one deadline each (any float or int clock, as long as one heap uses one clock)."""

    def __init__(self) -> None:
        #: (deadline, sequence, key); an entry is live when ``_live[key]`` holds its sequence.
        self._heap: list[tuple[float, int, K]] = []
        self._live: dict[K, tuple[float, int]] = {}
        self._sequence = itertools.count()

    def __len__(self) -> int:
        """Keys with a live deadline."""
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def deadline(self, key: K) -> float:
        """The key's live deadline, ``math.inf`` when it has none."""
        entry = self._live.get(key)
        return math.inf if entry is None else entry[0]

    def schedule(self, key: K, deadline: float) -> None:
        """Give ``key`` this deadline (replacing any earlier or later one); ``math.inf`` cancels it."""
        if deadline == math.inf:
            self.cancel(key)
            return
        sequence = next(self._sequence)
        self._live[key] = (deadline, sequence)
        heapq.heappush(self._heap, (deadline, sequence, key))
        if len(self._heap) > 2 * len(self._live) + COMPACT_SLACK:
            self._compact()

    def schedule_earlier(self, key: K, deadline: float) -> bool:
        """Schedule ``deadline`` only when it comes before the key's live one; True when it did."""
        if deadline >= self.deadline(key):
            return False
        self.schedule(key, deadline)
        return True

    def cancel(self, key: K) -> None:
        """Forget the key's deadline (its heap entry goes when it reaches the top, or at the next rebuild)."""
        self._live.pop(key, None)

    def next_deadline(self) -> float:
        """The earliest live deadline, ``math.inf`` when there is none."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else math.inf

    def pop_due(self, now: float) -> K | None:
        """The key with the earliest deadline when that deadline is ``<= now`` (its deadline is removed), else None."""
        self._drop_stale_top()
        if not self._heap or self._heap[0][0] > now:
            return None
        _deadline, _sequence, key = heapq.heappop(self._heap)
        del self._live[key]
        return key

    def _drop_stale_top(self) -> None:
        heap = self._heap
        while heap:
            deadline, sequence, key = heap[0]
            if self._live.get(key) == (deadline, sequence):
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [(deadline, sequence, key) for key, (deadline, sequence) in self._live.items()]
        heapq.heapify(self._heap)
