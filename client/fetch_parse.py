"""Turn one partition of a Fetch response into consumer records (sans-IO).

Guarantees: control batches are never returned; with read_committed, records of a transaction listed in the
partition's ``aborted_transactions`` are dropped (Kafka's algorithm: a producer's records are aborted from the
listed first offset up to its ABORT marker); records before ``position`` (the start of a batch fetched mid-way)
are dropped; the returned next position is past every whole batch seen, control batches included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oncelog.client.types import ConsumerRecord, TopicPartition
from oncelog.protocol.records import ControlType, control_record_type, iter_batches


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
    for header, batch_records in iter_batches(records or b""):
        if read_committed:
            while aborted_idx < len(aborted) and aborted[aborted_idx].first_offset <= header.last_offset:
                aborted_producers.add(aborted[aborted_idx].producer_id)
                aborted_idx += 1
        if header.is_control:
            if read_committed and batch_records:
                try:
                    is_abort = control_record_type(batch_records[0].key) == ControlType.ABORT
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
        ts_type = header.timestamp_type
        for r in batch_records:
            if r.offset >= position:
                out.append(
                    ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, ts_type, r.key, r.value, r.headers)
                )
    return out, next_position
