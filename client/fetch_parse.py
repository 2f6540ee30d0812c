"""Turn one partition of a Fetch response into consumer records (sans-IO): which batches, then their records.

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
from oncelog.protocol.records import (
    BatchHeader,
    ControlType,
    control_record_type,
    decode_columns,
    iter_headers,
    records_section,
)

#: A data batch to decode: the fetched bytes, the batch's position in them, its (CRC-checked) header, and the fetch
#: position (records before it are dropped: the first batch of a fetch may start before it).
Selected = tuple[memoryview, int, BatchHeader, int]


def select_batches(
    records: bytes | None,
    position: int,
    *,
    read_committed: bool,
    aborted_transactions: Iterable[Any] | None = None,
) -> tuple[list[Selected], int]:
    """The data batches of one partition's fetched bytes whose records the isolation level allows, not yet decoded,
    and the next fetch position.

    Every whole batch's CRC is checked here; control batches are read for their marker (read_committed) and never
    returned; aborted batches and batches before ``position`` are skipped whole, as Kafka's fetcher skips them.
    """
    selected: list[Selected] = []
    next_position = position
    aborted = sorted(aborted_transactions or (), key=lambda a: a.first_offset) if read_committed else []
    aborted_idx = 0
    aborted_producers: set[int] = set()
    if not records:
        return selected, next_position
    buf = memoryview(records)
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
        selected.append((buf, pos, header, position))
    return selected, next_position


def decode_selected(tp: TopicPartition, batch: Selected) -> Iterable[ConsumerRecord]:
    """The records of one selected batch, those before its fetch position dropped."""
    buf, pos, header, position = batch
    records = decoder()(buf, pos, header, tp)
    if header.base_offset < position:  # a batch fetched mid-way: drop the records before the position
        return [r for r in records if r.offset >= position]
    return records


def parse_partition(
    tp: TopicPartition,
    records: bytes | None,
    position: int,
    *,
    read_committed: bool,
    aborted_transactions: Iterable[Any] | None = None,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``position`` that the isolation level allows, and the next fetch position:
    :func:`select_batches`, every selected batch decoded."""
    selected, next_position = select_batches(
        records, position, read_committed=read_committed, aborted_transactions=aborted_transactions
    )
    out: list[ConsumerRecord] = []
    for batch in selected:
        out.extend(decode_selected(tp, batch))
    return out, next_position


def _is_abort_marker(buf: memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the control batch at ``pos`` holds an ABORT marker (a malformed marker counts as none)."""
    body = records_section(buf, pos, header)
    keys = decode_columns(body, header.records_count, header.base_offset, header.base_timestamp).keys
    try:
        return control_record_type(keys[0]) == ControlType.ABORT
    except ValueError:
        return False
