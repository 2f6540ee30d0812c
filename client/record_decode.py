"""A fetched data batch's records as ConsumerRecords: compiled when possible, pure Python otherwise.

The compiled reader is aiokafka's Cython ``DefaultRecordBatch`` (aiokafka's wheels carry it; where aiokafka is built
without a compiler it is missing, and :func:`compiled_reader` says so). It is imported on first use, not with the
client (aiokafka loads its whole client with it). Both paths return the same ConsumerRecords for the same batch and
raise InvalidBatchError for a malformed one, with one difference: a key or value length below -1 is refused by the
pure decoder and read as null by the compiled one (as Kafka's own consumer reads it).
``tests/client/test_record_decode.py`` runs both on the same batches. The environment variable
``ONCELOG_PURE_RECORDS=1`` keeps the pure-Python decoder even where the compiled one is installed.

Callers give a batch that ``protocol.records.iter_headers(check_crc=True)`` validated (length, magic, CRC). The
compiled reader may look a varint's length or two (up to 20 bytes) past a malformed batch's end before it raises, so
it reads a batch in place only when the caller's buffer goes on for :data:`PADDING` bytes after it, and a copy
followed by zeroed bytes otherwise (the last batch of a fetch).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import attrgetter
from typing import Any

from oncelog.client.types import ConsumerRecord, TopicPartition
from oncelog.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Compression,
    InvalidBatchError,
    RecordColumns,
    decode_columns,
    records_section,
)
from oncelog.protocol.records.batch import ATTRIBUTES_POS, COMPRESSION_MASK

#: Environment variable: "1" forces the pure-Python record decoder.
PURE_RECORDS_ENV = "ONCELOG_PURE_RECORDS"
#: Readable bytes after every batch the compiled reader reads (zeroed in a copy: a zero byte ends any varint).
PADDING = 32

_new_tuple = tuple.__new__
Decoder = Callable[[memoryview, int, BatchHeader, TopicPartition], Iterable[ConsumerRecord]]


def decode_pure(buf: memoryview, pos: int, header: BatchHeader, tp: TopicPartition) -> Iterable[ConsumerRecord]:
    """Every record of the data batch at ``pos``, by ``protocol.records.decode_columns`` (decoded at once, built as
    ConsumerRecords as the result is iterated)."""
    body = records_section(buf, pos, header)
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    columns = decode_columns(body, header.records_count, header.base_offset, header.base_timestamp, log_append_time)
    offsets, timestamps, keys, values, headers = columns
    # One C-level pass: zip builds each row, tuple.__new__ types it, no Python frame per record.
    rows = zip(
        repeat(tp.topic),
        repeat(tp.partition),
        offsets,
        timestamps,
        repeat(header.timestamp_type),
        keys,
        values,
        map(tuple, headers),  # tuple([]) is the shared empty tuple
    )
    return map(_new_tuple, repeat(ConsumerRecord), rows)


def decode_compiled(buf: memoryview, pos: int, header: BatchHeader, tp: TopicPartition) -> list[ConsumerRecord]:
    """Every record of the data batch at ``pos``, by aiokafka's compiled reader.

    A compressed batch is inflated here, within ``protocol.records``' size bound, and handed over as an
    uncompressed one (the reader's own inflation has no bound).
    """
    reader, corrupt = _compiled()
    view = _compiled_view(buf, pos, header)
    topic, partition, ts_type = tp.topic, tp.partition, header.timestamp_type
    try:
        return [
            _new_tuple(
                ConsumerRecord,
                (
                    topic,
                    partition,
                    r.offset,
                    r.timestamp,
                    ts_type,
                    r.key,
                    r.value,
                    tuple(h) if (h := r.headers) else (),
                ),
            )
            for r in reader(view)
        ]
    except corrupt as exc:
        raise InvalidBatchError(f"malformed record: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidBatchError("record header key is not valid UTF-8") from None


def _compiled_view(buf: memoryview, pos: int, header: BatchHeader) -> memoryview:
    """The batch at ``pos`` as the compiled reader may read it: in place when uncompressed and followed by
    :data:`PADDING` bytes, else an uncompressed copy followed by zeroed bytes."""
    end = pos + header.size
    if header.compression == Compression.NONE and end + PADDING <= len(buf):
        view = buf[pos:end]
    else:
        body = buf[pos + BATCH_HEADER_SIZE : end]
        if header.compression != Compression.NONE:
            body = records_section(buf, pos, header)
        size = BATCH_HEADER_SIZE + len(body)
        raw = bytearray(size + PADDING)
        raw[:BATCH_HEADER_SIZE] = buf[pos : pos + BATCH_HEADER_SIZE]
        raw[BATCH_HEADER_SIZE:size] = body
        raw[ATTRIBUTES_POS + 1] &= ~COMPRESSION_MASK  # the low byte of the big-endian attributes
        view = memoryview(raw)[:size]
    return view


def columns_pure(buf: memoryview, pos: int, header: BatchHeader) -> RecordColumns:
    """Every record of the data batch at ``pos`` as columns (``protocol.records.decode_columns``)."""
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    body = records_section(buf, pos, header)
    return decode_columns(body, header.records_count, header.base_offset, header.base_timestamp, log_append_time)


_OFFSET, _TIMESTAMP, _KEY, _VALUE, _HEADERS = map(attrgetter, ("offset", "timestamp", "key", "value", "headers"))


def columns_compiled(buf: memoryview, pos: int, header: BatchHeader) -> RecordColumns:
    """:func:`columns_pure` by the compiled reader: each field gathered by one C-level ``map(attrgetter)`` pass, no
    tuple per record (headers come as the reader's lists of (key, value) tuples)."""
    reader, corrupt = _compiled()
    try:
        records = list(reader(_compiled_view(buf, pos, header)))
        headers = list(map(_HEADERS, records))
    except corrupt as exc:
        raise InvalidBatchError(f"malformed record: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidBatchError("record header key is not valid UTF-8") from None
    return RecordColumns(
        list(map(_OFFSET, records)),
        list(map(_TIMESTAMP, records)),
        list(map(_KEY, records)),
        list(map(_VALUE, records)),
        headers,
    )


ColumnDecoder = Callable[[memoryview, int, BatchHeader], RecordColumns]


def columns_decoder() -> ColumnDecoder:
    """The column decoder matching :func:`decoder`'s choice (compiled where installed and not turned off)."""
    return columns_compiled if decoder() is decode_compiled else columns_pure


def compiled_reader() -> tuple[Any, type[Exception]] | None:
    """aiokafka's compiled batch reader and the error it raises, or None where it is not installed or not built."""
    try:
        from aiokafka.errors import CorruptRecordException
        from aiokafka.record._crecords.default_records import DefaultRecordBatch
    except ImportError:
        return None
    return DefaultRecordBatch, CorruptRecordException


_reader: tuple[Any, type[Exception]] | None = None


def _compiled() -> tuple[Any, type[Exception]]:
    global _reader
    if _reader is None:
        _reader = compiled_reader()
        if _reader is None:
            raise RuntimeError("the compiled record reader is not installed")
    return _reader


def choose_decoder() -> Decoder:
    """The compiled decoder where it is installed and not turned off by :data:`PURE_RECORDS_ENV`, else the pure one."""
    if os.environ.get(PURE_RECORDS_ENV) == "1" or compiled_reader() is None:
        return decode_pure
    return decode_compiled


_chosen: Decoder | None = None


def decoder() -> Decoder:
    """:func:`choose_decoder`'s answer, chosen on the first call (importing aiokafka then, not with the client)."""
    global _chosen
    if _chosen is None:
        _chosen = choose_decoder()
    return _chosen
