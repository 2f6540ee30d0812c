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

#: The one- and two-byte varints by zigzag value (values -8192 .. 8191): the encoder's table lookup.
_VARINTS = [bytes((z,)) if z < 0x80 else bytes(((z & 0x7F) | 0x80, z >> 7)) for z in range(0x4000)]
#: Values below this (and >= 0) are encoded by ``_VARINTS[value << 1]``.
_SMALL = 0x2000


def encode_varint(value: int) -> bytes:
    """Zigzag varint/varlong (Kafka ByteUtils.writeVarint/writeVarlong) of a signed 64-bit value."""
    z = (value << 1) ^ (value >> 63)
    if z < 0x4000:
        return _VARINTS[z]
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
    deltas = [rec.offset - base_offset for rec in records]
    return _encode_section(records, deltas, [rec.timestamp for rec in records], base_timestamp)


def _encode_section(
    records: Sequence[Any], offset_deltas: Iterable[int], timestamps: Iterable[int], base_timestamp: int
) -> bytes:
    """The records section: record i has offset delta ``offset_deltas[i]`` (>= 0) and ``timestamps[i]``.

    The producer's hot loop: small varints by table lookup, each record's length summed rather than its body
    joined, one join for the whole section.
    """
    table = _VARINTS
    small = _SMALL
    varint = encode_varint
    out: list[Any] = []
    extend = out.extend
    for rec, delta, timestamp in zip(records, offset_deltas, timestamps, strict=True):
        ts_delta = timestamp - base_timestamp
        z = (ts_delta << 1) ^ (ts_delta >> 63)
        ts_raw = table[z] if z < 0x4000 else varint(ts_delta)
        delta_raw = table[delta << 1] if delta < small else varint(delta)
        key = rec.key
        if key is None:
            key_len = b"\x01"  # zigzag(-1)
            key = b""
        else:
            if type(key) is not bytes:
                key = bytes(key)
            key_len = table[len(key) << 1] if len(key) < small else varint(len(key))
        value = rec.value
        if value is None:
            value_len = b"\x01"
            value = b""
        else:
            if type(value) is not bytes:
                value = bytes(value)
            value_len = table[len(value) << 1] if len(value) < small else varint(len(value))
        headers = b"".join(_encode_headers(rec.headers)) if rec.headers else b"\x00"
        length = 1 + len(ts_raw) + len(delta_raw) + len(key_len) + len(key) + len(value_len) + len(value) + len(headers)
        length_raw = table[length << 1] if length < small else varint(length)
        extend((length_raw, b"\x00", ts_raw, delta_raw, key_len, key, value_len, value, headers))
    return b"".join(out)


def _offsets_and_timestamps(
    records: Sequence[Any], base_offset: int, now_ms: int | None
) -> tuple[Sequence[int], list[int]]:
    """Each record's offset delta (its ``offset`` when it has one, else its index) and timestamp (``now_ms``, default
    the current time, when None). Raises ValueError unless the offsets increase from ``base_offset``."""
    if all(type(rec) is SimpleRecord for rec in records):
        deltas: Sequence[int] = range(len(records))
    else:
        deltas = []
        previous = -1
        for index, rec in enumerate(records):
            offset = getattr(rec, "offset", None)
            delta = index if offset is None else offset - base_offset
            if delta <= previous:
                raise ValueError(f"record offsets must increase from the base offset; got {base_offset + delta}")
            deltas.append(delta)
            previous = delta
    timestamps = [rec.timestamp for rec in records]
    if None in timestamps:
        now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
        timestamps = [now if ts is None else ts for ts in timestamps]
    return deltas, timestamps


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
    deltas, timestamps = _offsets_and_timestamps(records, base_offset, now_ms)
    previous = base_offset + deltas[-1]
    if last_offset is not None and last_offset < previous:
        raise ValueError(f"last offset {last_offset} is below the last record's {previous}")
    last_offset_delta = (previous if last_offset is None else last_offset) - base_offset
    if last_offset_delta > _INT32_MAX:
        raise ValueError("offset delta does not fit in an int32")
    base_timestamp = timestamps[0]
    max_timestamp = max(timestamps)
    body = _encode_section(records, deltas, timestamps, base_timestamp)
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
        len(records),
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
