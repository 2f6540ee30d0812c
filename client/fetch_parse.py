"""Turn one partition of a Fetch response into consumer records (sans-IO).

Guarantees: control batches are never returned; with read_committed, records of a transaction listed in the
partition's ``aborted_transactions`` are dropped (Kafka's algorithm: a producer's records are aborted from the
listed first offset up to its ABORT marker); records before ``position`` (the start of a batch fetched mid-way)
are dropped; the returned next position is past every whole batch seen, control batches included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oncelog.client.record_decode import decoder
from oncelog.client.types import ConsumerRecord, TopicPartition
from oncelog.protocol.records import ControlType, control_record_type, decode_columns, iter_headers, records_section


def parse_partition(
    tp: TopicPartition,
    records: bytes | None,
    position: int,
    *,
    read_committed: bool,
    aborted_transactions: Iterable[Any] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``position`` that the isolation level allows, and the next fetch position.

    Every whole batch's CRC is checked; only the batches whose records are returned are decoded (and a control
    batch's first key, with read_committed), as Kafka's fetcher skips aborted batches whole.
    """
    out: list[ConsumerRecord] = []
    next_position = position
    aborted = sorted(aborted_transactions or (), key=lambda a: a.first_offset) if read_committed else []
    aborted_idx = 0
    aborted_producers: set[int] = set()
    if not records:
        return out, next_position
    buf = memoryview(records)
    decode = decoder()
    for pos, header in iter_headers(buf, check_crc=True):
        if read_committed:
            while aborted_idx < len(aborted) and aborted[aborted_idx].first_offset <= header.last_offset:
                aborted_producers.add(aborted[aborted_idx].producer_id)
                aborted_idx += 1
        if header.is_control:
            if read_committed and header.records_count and _is_abort_marker(buf, pos, header):
                aborted_producers.discard(header.producer_id)
            next_position = max(next_position, header.next_offset)
            continue
        if header.next_offset <= position:
            continue
        next_position = max(next_position, header.next_offset)
        if read_committed and header.is_transactional and header.producer_id in aborted_producers:
            continue
        batch = decode(buf, pos, header, tp)
        if header.base_offset < position:  # a batch fetched mid-way: drop the records before the position
            batch = (r for r in batch if r.offset >= position)
        out.extend(batch)
    return out, next_position


def _is_abort_marker(buf: memoryview, pos: int, header: Any) -> bool:
    """Whether the control batch at ``pos`` holds an ABORT marker (a malformed marker counts as none)."""
    body = records_section(buf, pos, header)
    keys = decode_columns(body, header.records_count, header.base_offset, header.base_timestamp).keys
    try:
        return control_record_type(keys[0]) == ControlType.ABORT
    except ValueError:
        return False
