"""Records of a v2 record batch: encode a whole batch, decode one or a blob of several.

Record layout (Kafka protocol guide, "Record"; DefaultRecord.java), varints are zigzag-encoded::

    length: varint            bytes after this field
    attributes: int8          unused, 0
    timestampDelta: varlong   from the batch's baseTimestamp
    offsetDelta: varint       from the batch's baseOffset
    keyLength: varint         -1 = null
    key: bytes
    valueLength: varint       -1 = null
    value: bytes
    headersCount: varint
    headers: [headerKeyLength varint, headerKey utf8, headerValueLength varint (-1 = null), value]

Client- and test-side code: the broker's produce path never decodes records.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from oncelog.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    CRC_POS,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    InvalidBatchError,
    compute_crc,
    iter_headers,
    validate_batch,
)
from oncelog.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    compress,
    decompress,
)

#: RecordBatch.NO_TIMESTAMP: baseTimestamp/maxTimestamp of a batch without records.
NO_TIMESTAMP = -1
#: Smallest possible record: one byte each for length, attributes, timestampDelta, offsetDelta, keyLength,
#: valueLength and headersCount.
MIN_RECORD_SIZE = 7
_INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
_new_tuple = tuple.__new__


class Record(NamedTuple):
    """One decoded record; ``offset`` and ``timestamp`` (ms) are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class SimpleRecord(NamedTuple):
    """Input for :func:`encode_batch` without offsets; ``timestamp`` None means "now"."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


# --- varints -----------------------------------------------------------------------------------------------

_ONE_BYTE = [bytes((i,)) for i in range(128)]


def encode_varint(value: int) -> bytes:
    """Zigzag varint/varlong (Kafka ByteUtils.writeVarint/writeVarlong) of a signed 64-bit value."""
    z = (value << 1) ^ (value >> 63)
    if z < 0x80:
        return _ONE_BYTE[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def read_varint_tail(data: bytes, pos: int, first: int, max_bytes: int) -> tuple[int, int]:
    """Finish a zigzag varint whose first byte ``first`` (>= 0x80) was at ``pos - 1``."""
    value = first & 0x7F
    shift = 7
    for _ in range(max_bytes - 1):
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise InvalidBatchError(f"varint longer than {max_bytes} bytes")


def decode_varint(data: bytes, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; return (value, next position). Raises IndexError when truncated."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return read_varint_tail(data, pos + 1, b, max_bytes)


# --- encode ------------------------------------------------------------------------------------------------


def _encode_headers(headers: Iterable[tuple[str, bytes | None]]) -> list[bytes]:
    parts = []
    count = 0
    for hkey, hvalue in headers:
        raw = hkey.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(b"\x01")  # zigzag(-1)
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(hvalue)
        count += 1
    parts.insert(0, encode_varint(count))
    return parts


def encode_records(records: Sequence[Any], base_offset: int, base_timestamp: int) -> bytes:
    """The uncompressed records section; each record needs .offset, .timestamp, .key, .value, .headers."""
    varint = encode_varint
    out: list[bytes] = []
    append = out.append
    for rec in records:
        key = rec.key
        value = rec.value
        body = [
            b"\x00",
            varint(rec.timestamp - base_timestamp),
            varint(rec.offset - base_offset),
            b"\x01" if key is None else varint(len(key)),
            b"" if key is None else key,
            b"\x01" if value is None else varint(len(value)),
            b"" if value is None else value,
        ]
        if rec.headers:
            body.extend(_encode_headers(rec.headers))
        else:
            body.append(b"\x00")
        raw = b"".join(body)
        append(varint(len(raw)))
        append(raw)
    return b"".join(out)


def _with_offsets(records: Sequence[Any], base_offset: int, now_ms: int | None) -> list[Any]:
    """Fill in missing offsets (base_offset + index) and timestamps (now) as Record tuples."""
    out = []
    now = None
    for index, rec in enumerate(records):
        offset = getattr(rec, "offset", None)
        timestamp = rec.timestamp
        if timestamp is None:
            if now is None:
                now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
            timestamp = now
        out.append(
            Record(
                base_offset + index if offset is None else offset,
                timestamp,
                None if rec.key is None else bytes(rec.key),
                None if rec.value is None else bytes(rec.value),
                rec.headers,
            )
        )
    return out


def encode_batch(
    records: Sequence[Any],
    *,
    base_offset: int = 0,
    last_offset: int | None = None,
    compression: int = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression_level: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """Encode one v2 batch with a valid CRC-32C.

    ``records`` are Records (absolute offsets, strictly increasing, >= base_offset) or SimpleRecords /
    anything with key, value, headers, timestamp (offsets base_offset + index; a None timestamp becomes
    ``now_ms``, default the current time). baseTimestamp is the first record's timestamp, maxTimestamp the
    largest, as Kafka's MemoryRecordsBuilder writes them. ``last_offset`` overrides the batch's last offset
    (at least the last record's; Kafka's cleaner keeps a rewritten batch's, and with it the producer's last
    sequence). Raises ValueError for an empty sequence (Kafka's builder writes no batch at all for zero records)
    or offsets out of order / beyond an int32 delta.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    recs = _with_offsets(records, base_offset, now_ms)
    previous = base_offset - 1
    for rec in recs:
        if rec.offset <= previous:
            raise ValueError(f"record offsets must increase from the base offset; got {rec.offset}")
        previous = rec.offset
    if last_offset is not None and last_offset < previous:
        raise ValueError(f"last offset {last_offset} is below the last record's {previous}")
    last_offset_delta = (previous if last_offset is None else last_offset) - base_offset
    if last_offset_delta > _INT32_MAX:
        raise ValueError("offset delta does not fit in an int32")
    base_timestamp = recs[0].timestamp
    max_timestamp = max(rec.timestamp for rec in recs)
    body = encode_records(recs, base_offset, base_timestamp)
    if compression != Compression.NONE:
        body = compress(compression, body, level=compression_level)
    attributes = (
        (compression & 0x07)
        | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (TRANSACTIONAL_FLAG if transactional else 0)
        | (CONTROL_FLAG if control else 0)
    )
    size = BATCH_HEADER_SIZE + len(body)
    buf = bytearray(size)
    _HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    buf[BATCH_HEADER_SIZE:] = body
    _UINT32.pack_into(buf, CRC_POS, compute_crc(buf, 0, size))
    return bytes(buf)


def rewrite_batch(header: BatchHeader, records: Sequence[Record], *, compression: int | None = None) -> bytes:
    """``records`` (some or all of the batch ``header`` describes) as one batch with that batch's base and last
    offsets, producer id, epoch, base sequence, transactional flag, timestamp type and leader epoch, compressed
    with ``compression`` (default: the batch's own). Keeping the last offset keeps the producer's last sequence,
    as Kafka's log cleaner and LogValidator do when they rebuild a batch."""
    return encode_batch(
        records,
        base_offset=header.base_offset,
        last_offset=header.last_offset,
        compression=header.compression if compression is None else compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch,
    )


# --- decode ------------------------------------------------------------------------------------------------

#: Zigzag value of a one-byte varint by its byte (None: the varint goes on).
_ONE: list[int | None] = [((b >> 1) ^ -(b & 1)) if b < 0x80 else None for b in range(256)]
#: Zigzag value of a two-byte varint by ``first | second << 8`` (None: not a two-byte varint).
_TWO: list[int | None] = [None] * 65536
for _first in range(0x80, 0x100):
    for _second in range(0x80):
        _z = (_first & 0x7F) | (_second << 7)
        _TWO[_first | (_second << 8)] = (_z >> 1) ^ -(_z & 1)
del _first, _second, _z


class RecordColumns(NamedTuple):
    """The records of one batch as columns: ``offsets[i]``, ``timestamps[i]`` (absolute, ms), ``keys[i]``,
    ``values[i]``, ``headers[i]`` describe record i. Offsets strictly increase when the batch is well formed."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]]]

    def rows(self) -> list[Record]:
        """The same records as Record tuples."""
        return list(map(_new_tuple, repeat(Record), zip(*self, strict=True)))


def decode_columns(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None = None
) -> RecordColumns:
    """Decode exactly ``count`` records spanning all of ``data`` into columns; raises InvalidBatchError otherwise.

    ``log_append_time``, when given, replaces every record's timestamp (LogAppendTime batches: Kafka reports
    the batch's maxTimestamp for each record).
    """
    if count > len(data) // MIN_RECORD_SIZE:
        raise InvalidBatchError(f"record count {count} cannot fit in {len(data)} bytes")
    try:
        return _decode_columns(data, count, base_offset, base_timestamp, log_append_time)
    except IndexError:
        raise InvalidBatchError("truncated record") from None
    except UnicodeDecodeError:
        raise InvalidBatchError("record header key is not valid UTF-8") from None


def decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None = None
) -> list[Record]:
    """:func:`decode_columns` as a list of Record tuples."""
    return decode_columns(data, count, base_offset, base_timestamp, log_append_time).rows()


def _decode_columns(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> RecordColumns:
    """The hot loop of the consumer: one pass, one- and two-byte varints by table lookup (longer ones by
    :func:`read_varint_tail`), five list appends per record and no per-record tuple. A read past ``data`` raises
    IndexError (the caller's "truncated record")."""
    one = _ONE
    two = _TWO
    tail = read_varint_tail
    end = len(data)
    pos = 0
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_col: list[list[tuple[str, bytes | None]]] = []
    add_offset = offsets.append
    add_timestamp = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers_col.append
    min_length = MIN_RECORD_SIZE - 1
    for _ in range(count):
        # length (varint)
        length = one[data[pos]]
        if length is not None:
            pos += 1
        else:
            length = two[data[pos] | data[pos + 1] << 8]
            if length is not None:
                pos += 2
            else:
                length, pos = tail(data, pos + 1, data[pos], 5)
        rec_end = pos + length
        if length < min_length or rec_end > end:
            raise InvalidBatchError(f"record length {length} is invalid for the bytes remaining")
        pos += 1  # attributes
        # timestampDelta (varlong)
        ts_delta = one[data[pos]]
        if ts_delta is not None:
            pos += 1
        else:
            ts_delta = two[data[pos] | data[pos + 1] << 8]
            if ts_delta is not None:
                pos += 2
            else:
                ts_delta, pos = tail(data, pos + 1, data[pos], 10)
        # offsetDelta (varint)
        off_delta = one[data[pos]]
        if off_delta is not None:
            pos += 1
        else:
            off_delta = two[data[pos] | data[pos + 1] << 8]
            if off_delta is not None:
                pos += 2
            else:
                off_delta, pos = tail(data, pos + 1, data[pos], 5)
        # key
        size = one[data[pos]]
        if size is not None:
            pos += 1
        else:
            size = two[data[pos] | data[pos + 1] << 8]
            if size is not None:
                pos += 2
            else:
                size, pos = tail(data, pos + 1, data[pos], 5)
        if size < 0:
            if size != -1:
                raise InvalidBatchError(f"invalid key length {size}")
            add_key(None)
        else:
            if pos + size > rec_end:
                raise InvalidBatchError("record key overruns the record")
            add_key(data[pos : pos + size])
            pos += size
        # value
        size = one[data[pos]]
        if size is not None:
            pos += 1
        else:
            size = two[data[pos] | data[pos + 1] << 8]
            if size is not None:
                pos += 2
            else:
                size, pos = tail(data, pos + 1, data[pos], 5)
        if size < 0:
            if size != -1:
                raise InvalidBatchError(f"invalid value length {size}")
            add_value(None)
        else:
            if pos + size > rec_end:
                raise InvalidBatchError("record value overruns the record")
            add_value(data[pos : pos + size])
            pos += size
        # headers
        nheaders = one[data[pos]]
        if nheaders is not None:
            pos += 1
        else:
            nheaders, pos = tail(data, pos + 1, data[pos], 5)
        headers: list[tuple[str, bytes | None]] = []
        if nheaders:
            if nheaders < 0 or nheaders > (rec_end - pos) // 2:
                raise InvalidBatchError(f"invalid header count {nheaders}")
            pos = _decode_headers(data, pos, rec_end, nheaders, headers)
        if pos != rec_end:
            used = length + pos - rec_end
            raise InvalidBatchError(f"record declared {length} bytes but its fields use {used}")
        add_offset(base_offset + off_delta)
        add_timestamp(base_timestamp + ts_delta)
        add_headers(headers)
    if pos != end:
        raise InvalidBatchError(f"{end - pos} bytes remain after the declared {count} records")
    if log_append_time is not None:
        timestamps = [log_append_time] * count
    return RecordColumns(offsets, timestamps, keys, values, headers_col)


def _decode_headers(data: bytes, pos: int, rec_end: int, count: int, headers: list[tuple[str, bytes | None]]) -> int:
    for _ in range(count):
        size, pos = decode_varint(data, pos, 5)
        if size < 0 or pos + size > rec_end:
            raise InvalidBatchError(f"invalid header key length {size}")
        hkey = data[pos : pos + size].decode()
        pos += size
        size, pos = decode_varint(data, pos, 5)
        if size < 0:
            if size != -1:
                raise InvalidBatchError(f"invalid header value length {size}")
            hvalue = None
        else:
            if pos + size > rec_end:
                raise InvalidBatchError("header value overruns the record")
            hvalue = data[pos : pos + size]
            pos += size
        headers.append((hkey, hvalue))
    return pos


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[BatchHeader, list[Record]]:
    """Validate (length, magic, CRC) and decode the whole batch at ``pos``, control batches included.

    Raises InvalidBatchError (``corrupt=True`` on CRC mismatch) for anything malformed, including a
    truncated batch, a record count that disagrees with the records, or a records section that would
    decompress beyond ``max_decompressed_size``.
    """
    header = validate_batch(buf, pos)
    return header, _records_of(buf, pos, header, max_decompressed_size)


def _records_of(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, max_decompressed_size: int
) -> list[Record]:
    return _columns_of(buf, pos, header, max_decompressed_size).rows()


def _columns_of(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, max_decompressed_size: int
) -> RecordColumns:
    body = records_section(buf, pos, header, max_decompressed_size)
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    return decode_columns(body, header.records_count, header.base_offset, header.base_timestamp, log_append_time)


def records_section(
    buf: bytes | bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The records section of the (validated) batch ``header`` describes at ``pos``, decompressed; raises
    InvalidBatchError when it would decompress beyond ``max_decompressed_size``."""
    body = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression != Compression.NONE and (body or header.records_count):
        # An empty batch (left by compaction) has no records section to decompress.
        body = decompress(header.compression, body, max_size=max_decompressed_size)
    return body


def iter_batches(
    buf: bytes | bytearray | memoryview, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Yield ``(header, records)`` for each whole batch of a blob such as a Fetch response's records.

    A partial batch at the end (Fetch responses may end with one) is ignored; any malformed whole batch
    raises InvalidBatchError. Control and empty batches are yielded like any other.
    """
    for pos, header in iter_headers(buf, check_crc=True):
        yield header, _records_of(buf, pos, header, max_decompressed_size)


def iter_batch_columns(
    buf: bytes | bytearray | memoryview, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[tuple[BatchHeader, RecordColumns]]:
    """:func:`iter_batches` with each batch's records as :class:`RecordColumns` (the consumer's bulk path)."""
    for pos, header in iter_headers(buf, check_crc=True):
        yield header, _columns_of(buf, pos, header, max_decompressed_size)


def iter_records(
    buf: bytes | bytearray | memoryview, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[tuple[BatchHeader, Record]]:
    """Yield ``(header, record)`` over every record of every whole batch in ``buf`` (see iter_batches)."""
    for header, records in iter_batches(buf, max_decompressed_size=max_decompressed_size):
        for record in records:
            yield header, record
