"""Read one topic-partition offset range [start, end) as Arrow record batches (runs in a Spark task).

Guarantees: yields the records with start <= offset < end in offset order, each once; control records are never
returned and, with read_committed, neither are records of aborted transactions (the client's fetch path drops
them), so a range may yield fewer rows than end - start. Raises TimeoutError when the position stops advancing
for ``timeout_ms`` (e.g. the range lies beyond what the broker has).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from oncelog.client import TopicPartition
from oncelog.client.sync import Consumer
from oncelog.pipeline.rows import records_to_batch

MAX_ROWS_PER_BATCH = 20000  # rows per Arrow batch handed to Spark
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024  # max.partition.fetch.bytes for range reads (Kafka default 1048576)
FETCH_WAIT_MS = 200


@dataclass(frozen=True)
class OffsetRange:
    """One Spark input partition: a topic-partition and [start, end)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def read_range(
    bootstrap: str, rng: OffsetRange, *, isolation: str = "read_committed", timeout_ms: int = 120000
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``rng`` (see the module docstring)."""
    if rng.end <= rng.start:
        return
    tp = rng.tp
    with Consumer(
        bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        max_poll_records=MAX_ROWS_PER_BATCH,
        max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
        fetch_max_wait_ms=FETCH_WAIT_MS,
        client_id="oncelog-spark-reader",
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        position = rng.start
        stalled_since = time.monotonic()
        while position < rng.end:
            got = consumer.getmany(tp, timeout_ms=FETCH_WAIT_MS, max_records=MAX_ROWS_PER_BATCH).get(tp, [])
            records = [r for r in got if r.offset < rng.end] if got and got[-1].offset >= rng.end else got
            if records:
                yield records_to_batch(records)
            new_position = consumer.position(tp)
            if new_position > position:
                position = new_position
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > timeout_ms / 1000:
                raise TimeoutError(
                    f"reading {tp.topic}-{tp.partition} [{rng.start}, {rng.end}) stalled at "
                    f"{position} for {timeout_ms} ms"
                )
