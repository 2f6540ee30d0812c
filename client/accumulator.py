"""Per-partition record batches waiting to be sent (the producer's RecordAccumulator).

Guarantees: records of one partition leave in the order they were appended; at most ``max_in_flight`` batches per
partition are in flight; a batch to be retried goes back in sequence order at the head of its queue and is resent
(with its original sequence number) only once nothing of its partition is in flight, so retries keep the order.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from oncelog.client.future import Future
from oncelog.client.types import RecordMetadata, TopicPartition
from oncelog.protocol.records import SimpleRecord

RECORD_OVERHEAD = 21  # an estimate of a v2 record's length/attribute/delta/count varints
BATCH_OVERHEAD = 61  # the v2 batch header


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    created: float
    deadline: float
    records: list[SimpleRecord] = field(default_factory=list)
    futures: list[Future[RecordMetadata]] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    base_sequence: int = -1
    payload: bytes | None = None  # encoded once, when first drained; retries resend these bytes
    attempts: int = 0
    retry_at: float = 0.0

    def complete(self, base_offset: int, log_append_time: int) -> None:
        topic, partition = self.tp
        new = tuple.__new__
        for i, (record, fut) in enumerate(zip(self.records, self.futures, strict=True)):
            if fut.done():  # a future shared by many records (append_checked, append_many) is set by the first
                continue
            ts = log_append_time if log_append_time >= 0 else (record.timestamp or -1)
            offset = base_offset + i if base_offset >= 0 else -1
            fut.set_result(new(RecordMetadata, (topic, partition, offset, ts)))

    def fail(self, error: BaseException) -> None:
        for fut in self.futures:
            fut.set_exception(error)  # a no-op for a future already set (one shared by many records)


def record_size(record: SimpleRecord) -> int:
    size = RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    for hkey, hvalue in record.headers:
        size += 2 + len(hkey) + len(hvalue or b"")
    return size


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, delivery_timeout_ms: int, max_in_flight: int = 1) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.max_in_flight = max_in_flight
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.in_flight: dict[TopicPartition, list[ProducerBatch]] = {}

    def append(
        self, tp: TopicPartition, record: SimpleRecord, fut: Future[RecordMetadata], now: float, size: int
    ) -> tuple[bool, bool]:
        """Add ``record`` of ``size`` estimated bytes (``record_size``); returns (it started a new batch, it filled its
        batch): either wakes the sender."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        batch = queue[-1] if queue else None
        if batch is None or batch.payload is not None or (batch.records and batch.size + size > self.batch_size):
            batch = ProducerBatch(tp, now, now + self.delivery_timeout_s)
            queue.append(batch)
            new = True
        else:
            new = False
        batch.records.append(record)
        batch.futures.append(fut)
        batch.size += size
        return new, batch.size >= self.batch_size

    def append_many(
        self,
        tp: TopicPartition,
        records: Sequence[SimpleRecord],
        sizes: Sequence[int],
        fut: Future[RecordMetadata],
        now: float,
    ) -> tuple[bool, bool]:
        """:meth:`append` of every record of ``records`` (of estimated ``sizes``) in order, with one future shared by
        them all, batch by batch rather than record by record (batches are cut where :meth:`append` would cut them);
        returns (a batch was started, a batch was filled)."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        prefix = list(accumulate(sizes, initial=0))
        new = full = False
        i, n = 0, len(records)
        while i < n:
            batch = queue[-1] if queue else None
            if (
                batch is None
                or batch.payload is not None
                or (batch.records and batch.size + sizes[i] > self.batch_size)
            ):
                batch = ProducerBatch(tp, now, now + self.delivery_timeout_s)
                queue.append(batch)
                new = True
            # record i goes in (as append puts it), then every following one that still fits
            j = max(bisect_right(prefix, prefix[i] + self.batch_size - batch.size, i) - 1, i + 1)
            batch.records += records[i:j]
            batch.futures += repeat(fut, j - i)
            batch.size += prefix[j] - prefix[i]
            full = full or batch.size >= self.batch_size
            i = j
        return new, full

    def ready(
        self, now: float, *, flushing: bool, sendable: Callable[[TopicPartition], bool]
    ) -> tuple[list[ProducerBatch], float]:
        """Pop the head batch of every partition that may send now; also the seconds until the next one may."""
        out: list[ProducerBatch] = []
        wait = 3600.0
        for tp, queue in self.queues.items():
            flying = self.in_flight.setdefault(tp, [])
            while queue and len(flying) < self.max_in_flight and sendable(tp):
                batch = queue[0]
                if batch.payload is not None and flying:
                    break  # a retry goes out alone, after everything before it came back
                if batch.retry_at > now:
                    wait = min(wait, batch.retry_at - now)
                    break
                linger_end = batch.created + self.linger_s
                full = len(queue) > 1 or batch.size >= self.batch_size or batch.payload is not None
                if not (full or flushing or linger_end <= now):
                    wait = min(wait, linger_end - now)
                    break
                out.append(queue.popleft())
                flying.append(batch)
                if batch.payload is not None:
                    break
        return out, max(wait, 0.0)

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a batch that will be retried back among the retries at the head of its queue, by sequence."""
        queue = self.queues.setdefault(batch.tp, deque())
        i = 0
        while i < len(queue) and queue[i].payload is not None and queue[i].base_sequence < batch.base_sequence:
            i += 1
        queue.insert(i, batch)

    def done(self, batch: ProducerBatch) -> None:
        flying = self.in_flight.get(batch.tp)
        if flying is not None and batch in flying:
            flying.remove(batch)

    def earlier_pending(self, batch: ProducerBatch) -> bool:
        """True when a batch of the same partition with a lower sequence is queued for retry or in flight."""
        queued = (b for b in self.queues.get(batch.tp, ()) if b.payload is not None)
        flying = (b for b in self.in_flight.get(batch.tp, ()) if b is not batch)
        return any(0 <= b.base_sequence < batch.base_sequence for b in (*queued, *flying))

    def has_in_flight(self) -> bool:
        return any(self.in_flight.values())

    def expired(self, now: float) -> Iterator[ProducerBatch]:
        """Pop queued batches past their delivery deadline."""
        for queue in self.queues.values():
            while queue and queue[0].deadline <= now:
                yield queue.popleft()

    def drop_unsent(self, error: BaseException) -> int:
        """Fail every queued (not in flight) batch with ``error``; returns how many records were dropped."""
        dropped = 0
        for queue in self.queues.values():
            while queue:
                batch = queue.popleft()
                dropped += len(batch.records)
                batch.fail(error)
        return dropped

    def queued(self) -> bool:
        return any(self.queues.values())

    def unfinished(self) -> bool:
        return self.has_in_flight() or self.queued()
