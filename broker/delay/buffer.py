"""One delay partition's fetched records not yet acted on, in append (= due) order, bounded.

Guarantees: records leave in the order they came; it never holds more than ``max_records``: ``full`` turns true at
``max_records`` so the service stops fetching the partition (pauses it) until the head has been acted on, and records
fetched past the bound are handed back (fetched again later), keeping memory bounded however many records are pending
in the log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from oncelog.broker.delay.route import Action, Wait
from oncelog.client.types import ConsumerRecord, TopicPartition

#: delay.max.buffered.records default (oncelog's own): fetched records held per delay partition before it is paused.
DELAY_MAX_BUFFERED_RECORDS = 10000


class PartitionBuffer:
    """Fetched records of one delay partition; only the head is ever examined."""

    def __init__(self, tp: TopicPartition, max_records: int = DELAY_MAX_BUFFERED_RECORDS) -> None:
        if max_records < 1:
            raise ValueError("delay.max.buffered.records must be at least 1")
        self.tp = tp
        self.max_records = max_records
        self._records: deque[ConsumerRecord] = deque()

    def __len__(self) -> int:
        return len(self._records)

    @property
    def full(self) -> bool:
        """Paused: holds ``max_records``."""
        return len(self._records) >= self.max_records

    def extend(self, records: Iterable[ConsumerRecord]) -> int | None:
        """Take ``records`` up to ``max_records`` held; returns the offset of the first one not taken (the service
        fetches from there again once there is room), None when all were taken."""
        for record in records:
            if len(self._records) >= self.max_records:
                return record.offset
            self._records.append(record)
        return None

    def take_due(
        self, decide: Callable[[ConsumerRecord], Action], limit: int
    ) -> tuple[list[tuple[ConsumerRecord, Action]], int | None]:
        """Pop up to ``limit`` head records with their actions while ``decide`` gives one that is not Wait; returns
        them and the time the head is next due (None when the buffer is empty or the limit stopped it)."""
        taken: list[tuple[ConsumerRecord, Action]] = []
        records = self._records
        while records and len(taken) < limit:
            action = decide(records[0])
            if isinstance(action, Wait):
                return taken, action.until_ms
            taken.append((records.popleft(), action))
        return taken, None
