"""Fetched record batches -> Arrow record batches of the Spark source's rows, in bulk: each record batch is decoded
into columns (the client's compiled column decoder where installed, ``protocol.records.decode_columns`` otherwise)
and every Arrow column is built by one call, with no ConsumerRecord per record.

Guarantees: :func:`to_arrow` returns the same rows, in the same order, as ``rows.records_to_batch`` of the records
the consumer's ``getmany`` would have returned for the same batches (those at or after each batch's fetch position
and before ``end``, none past its TTL); a batch with headers goes through the consumer's record path (its TTL filter
needs each record), so the fast path is the common one, records without headers.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator

import pyarrow as pa
from oncelog.client.expiry import ExpiryFilter
from oncelog.client.fetch_parse import Selected, decode_selected
from oncelog.client.record_decode import ColumnDecoder, columns_decoder
from oncelog.client.types import TopicPartition
from oncelog.pipeline.rows import ARROW_SCHEMA, HEADER_TYPE, records_to_batch

_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US = ARROW_SCHEMA.field("timestamp").type
_NO_HEADERS = pa.array([], HEADER_TYPE.value_type)  # the (empty) values of an all-empty headers column
_ZERO = pa.scalar(0, pa.int32())


class _Columns:
    """Columns of consecutive headerless records, gathered batch by batch, then made one Arrow batch."""

    __slots__ = ("keys", "offsets", "timestamps", "ts_types", "values")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.ts_types: list[tuple[int, int]] = []  # (rows, timestamp type) runs

    def add(self, offsets: list[int], timestamps: list[int], keys: list, values: list, ts_type: int) -> None:
        self.offsets += offsets
        self.timestamps += timestamps
        self.keys += keys
        self.values += values
        self.ts_types.append((len(offsets), ts_type))

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self, tp: TopicPartition) -> pa.RecordBatch:
        n = len(self.offsets)
        ts_types = pa.concat_arrays([pa.repeat(pa.scalar(kind, pa.int32()), rows) for rows, kind in self.ts_types])
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.repeat(pa.scalar(tp.topic, pa.string()), n),
                pa.repeat(pa.scalar(tp.partition, pa.int32()), n),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.timestamps, _TIMESTAMP_MS).cast(_TIMESTAMP_US),  # exact: ms -> us times 1000
                ts_types,
                pa.ListArray.from_arrays(pa.repeat(_ZERO, n + 1), _NO_HEADERS),
            ],
            schema=ARROW_SCHEMA,
        )


def to_arrow(
    tp: TopicPartition,
    selected: Iterable[Selected],
    end: int,
    *,
    expiry: ExpiryFilter,
    max_rows: int,
    decode: ColumnDecoder | None = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``selected`` (``Consumer.getmany_batches``) before offset ``end`` (see the
    module docstring): runs of headerless record batches up to about ``max_rows`` rows (a record batch is never
    split), one per record batch with headers; no empty batch."""
    decode = decode or columns_decoder()
    pending = _Columns()
    for batch in selected:
        buf, pos, header, position = batch
        if header.base_offset >= end:
            break
        if len(pending) >= max_rows:
            yield pending.batch(tp)
            pending = _Columns()
        columns = decode(buf, pos, header)
        if any(columns.headers):
            if len(pending):
                yield pending.batch(tp)
                pending = _Columns()
            live, _ = expiry.split(decode_selected(tp, batch), int(time.time() * 1000))
            live = [r for r in live if r.offset < end]
            if live:
                yield records_to_batch(live)
            continue
        offsets = columns.offsets
        lo = bisect_left(offsets, position) if header.base_offset < position else 0
        hi = bisect_left(offsets, end) if header.last_offset >= end else len(offsets)
        if lo or hi < len(offsets):
            pending.add(
                offsets[lo:hi],
                columns.timestamps[lo:hi],
                columns.keys[lo:hi],
                columns.values[lo:hi],
                header.timestamp_type,
            )
        else:
            pending.add(offsets, columns.timestamps, columns.keys, columns.values, header.timestamp_type)
    if len(pending):
        yield pending.batch(tp)
