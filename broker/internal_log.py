"""Replaying an internal topic's partition (``__transaction_state``, ``__consumer_offsets``) at start."""

from __future__ import annotations

from collections.abc import Iterator

from oncelog.protocol.records import BatchHeader, Record, iter_batches
from oncelog.storage.log import PartitionLog

#: Bytes read per step while replaying.
REPLAY_CHUNK_BYTES = 8 * 1024 * 1024


def replay(partition_log: PartitionLog | None) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record from the log start to the log end, in offset order, with its batch header (control batches
    included); nothing for a missing log."""
    if partition_log is None:
        return
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        chunk = partition_log.read(offset, REPLAY_CHUNK_BYTES, max_offset=end)
        if not chunk:
            break
        for header, records in iter_batches(chunk):
            for record in records:
                if record.offset >= offset:
                    yield header, record
            offset = max(offset, header.next_offset)
