"""Turn one partition of a Fetch response into consumer records (sans-IO).

Guarantees: control batches are never returned; with read_committed, records of a transaction listed in the
partition's ``aborted_transactions`` are dropped (Kafka's algorithm: a producer's records are aborted from the
listed first offset up to its ABORT marker); records before ``position`` (the start of a batch fetched mid-way)
are dropped; the returned next position is past every whole batch seen, control batches included.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Any

from oncelog.client.types import ConsumerRecord, TopicPartition
from oncelog.protocol.records import ControlType, control_record_type, iter_batch_columns

_new_tuple = tuple.__new__


def parse_partition(
    tp: TopicPartition,
    records: bytes | None,
    position: int,
    *,
    read_committed: bool,
    aborted_transactions: Iterable[Any] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``position`` that the isolation level allows, and the next fetch position."""
    out: list[ConsumerRecord] = []
    next_position = position
    aborted = sorted(aborted_transactions or (), key=lambda a: a.first_offset) if read_committed else []
    aborted_idx = 0
    aborted_producers: set[int] = set()
    for header, columns in iter_batch_columns(records or b""):
        if read_committed:
            while aborted_idx < len(aborted) and aborted[aborted_idx].first_offset <= header.last_offset:
                aborted_producers.add(aborted[aborted_idx].producer_id)
                aborted_idx += 1
        if header.is_control:
            if read_committed and columns.keys:
                try:
                    is_abort = control_record_type(columns.keys[0]) == ControlType.ABORT
                except ValueError:
                    is_abort = False
                if is_abort:
                    aborted_producers.discard(header.producer_id)
            next_position = max(next_position, header.next_offset)
            continue
        if header.next_offset <= position:
            continue
        next_position = max(next_position, header.next_offset)
        if read_committed and header.is_transactional and header.producer_id in aborted_producers:
            continue
        offsets, timestamps, keys, values, headers = columns
        if header.base_offset < position:  # a batch fetched mid-way: drop the records before the position
            keep = [i for i, offset in enumerate(offsets) if offset >= position]
            offsets, timestamps, keys, values, headers = ([c[i] for i in keep] for c in columns)
        # One C-level pass: zip builds each row, tuple.__new__ types it, no Python frame per record.
        rows = zip(
            repeat(tp.topic),
            repeat(tp.partition),
            offsets,
            timestamps,
            repeat(header.timestamp_type),
            keys,
            values,
            headers,
        )
        out.extend(map(_new_tuple, repeat(ConsumerRecord), rows))
    return out, next_position
