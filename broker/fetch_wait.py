"""What a parked consumer Fetch waits for: ``min_bytes`` of new visible data, counted as appends make it visible.

Kafka's DelayedFetch is looked at (``tryComplete``) on every append to its partitions. Here each high watermark
advance of a partition measures once, from batch positions, how many bytes became visible up to the high watermark
and up to the last stable offset (``visible_growth``), and every fetch parked on the partition only subtracts that
from what it still misses (``FetchWaiter.grown``): a fetch is woken, and reads, once its ``min_bytes`` may be
there, so a produce costs each parked fetch an addition, not a task switch and a look at its partitions. The woken
fetch measures exactly again and parks anew if the estimate was generous. Guaranteed: growth is never
under-counted while a partition's log only grows; anything else (a role change, a deletion, a truncated or new
log) wakes every fetch parked on the partition.
"""

from __future__ import annotations

import trio
from oncelog.storage.log import PartitionLog


class FetchWaiter:
    """One parked fetch: its event is set once ``missing`` more bytes became visible to it (counted up to the last
    stable offset for read_committed, else the high watermark), or on ``set`` (any other change)."""

    __slots__ = ("committed", "event", "missing")

    def __init__(self, missing: int, *, committed: bool) -> None:
        self.event = trio.Event()
        self.missing = missing
        self.committed = committed

    def set(self) -> None:
        self.event.set()

    def grown(self, up_to_high_watermark: int, up_to_stable: int) -> bool:
        """Count newly visible bytes; True (and the event set) once nothing is missing."""
        self.missing -= up_to_stable if self.committed else up_to_high_watermark
        if self.missing > 0:
            return False
        self.event.set()
        return True


def bytes_between(partition_log: PartitionLog, start: int, end: int, starts: dict[tuple[int, int], int]) -> int:
    """Bytes of the batches holding offsets ``start`` up to ``end`` (a batch holding ``end`` not counted), from
    batch positions: no record is read. ``starts`` caches where ``start`` lies in a segment between calls; the end
    of the log needs no lookup (the segment's size)."""
    total = 0
    at_log_end = end >= partition_log.log_end_offset
    for segment in partition_log.segments:
        if segment.next_offset <= start:
            continue
        if segment.base_offset >= end:
            break
        begin = 0
        if segment.base_offset <= start:
            key = (segment.base_offset, start)
            if key not in starts:
                found = segment.find_batch(start)
                starts[key] = found[0] if found is not None else segment.size
            begin = starts[key]
        if at_log_end or end >= segment.next_offset:
            until = segment.size
        else:
            found = segment.find_batch(end)
            until = found[0] if found is not None else segment.size
        total += max(0, until - begin)
    return total


class VisibleEnds:
    """Per partition, the high watermark and last stable offset at the last advance, to measure the next one."""

    def __init__(self) -> None:
        self._ends: dict[tuple[str, int], tuple[PartitionLog, int, int]] = {}

    def advance(self, partition_log: PartitionLog, *, measure: bool = True) -> tuple[int, int] | None:
        """Bytes that became visible up to the high watermark and up to the last stable offset since the last
        call for this partition; None when that cannot be told (first call, another log, an end moved back) or
        ``measure`` is false (nobody waits: only the ends are noted)."""
        tp = (partition_log.topic, partition_log.partition)
        high_watermark, stable = partition_log.high_watermark, partition_log.last_stable_offset
        last = self._ends.get(tp)
        self._ends[tp] = (partition_log, high_watermark, stable)
        if not measure or last is None or last[0] is not partition_log:
            return None
        if high_watermark < last[1] or stable < last[2]:
            return None
        return (
            bytes_between(partition_log, last[1], high_watermark, {}) if high_watermark > last[1] else 0,
            bytes_between(partition_log, last[2], stable, {}) if stable > last[2] else 0,
        )

    def forget(self, topic: str, partition: int) -> None:
        self._ends.pop((topic, partition), None)
