"""Read one topic-partition offset range [start, end) as Arrow record batches (runs in a Spark task).

Guarantees: yields the records with start <= offset < end in offset order, each once; control records are never
returned and, with read_committed, neither are records of aborted transactions (the client's fetch path drops
them), nor records past their TTL (as the bundled consumer), so a range may yield fewer rows than end - start.
Raises TimeoutError when the position stops advancing for ``timeout_ms`` (e.g. the range lies beyond what the
broker has). Arrow columns are built from the fetched record batches in bulk (``pipeline.columns``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from oncelog.client.expiry import ExpiryFilter
from oncelog.client.sync import Consumer
from oncelog.pipeline.columns import to_arrow
from oncelog.pipeline.offsets import OffsetRange

MAX_ROWS_PER_BATCH = 20000  # rows per Arrow batch handed to Spark
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024  # max.partition.fetch.bytes for range reads (Kafka default 1048576)
FETCH_WAIT_MS = 200


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
        expiry = ExpiryFilter()
        while position < rng.end:
            selected = consumer.getmany_batches(tp, timeout_ms=FETCH_WAIT_MS)
            yield from to_arrow(tp, selected, rng.end, expiry=expiry, max_rows=MAX_ROWS_PER_BATCH)
            new_position = consumer.position(tp)
            if new_position > position:
                position = new_position
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > timeout_ms / 1000:
                raise TimeoutError(
                    f"reading {tp.topic}-{tp.partition} [{rng.start}, {rng.end}) stalled at "
                    f"{position} for {timeout_ms} ms"
                )
