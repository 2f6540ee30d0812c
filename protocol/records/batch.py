"""RecordBatch v2 header: parse, validate and patch without touching the records.

Layout (Kafka protocol guide, "Record Batch"; DefaultRecordBatch.java)::

    baseOffset: int64                 0
    batchLength: int32                8   bytes after this field
    partitionLeaderEpoch: int32      12
    magic: int8 (= 2)                16
    crc: uint32 (CRC-32C)            17   covers attributes .. end of batch
    attributes: int16                21
    lastOffsetDelta: int32           23
    baseTimestamp: int64             27
    maxTimestamp: int64              35
    producerId: int64                43
    producerEpoch: int16             51
    baseSequence: int32              53
    recordsCount: int32              57
    records                          61

The broker's produce and fetch paths only ever look at this header; nothing here is per record.
``struct`` is used rather than construct because this runs once per batch on the hot path.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

BATCH_HEADER_SIZE = 61
#: Bytes before ``batchLength`` counts from (baseOffset + batchLength).
LOG_OVERHEAD = 12
MAGIC_V2 = 2
BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PREFIX = struct.Struct(">qii")
_UINT32 = struct.Struct(">I")


class InvalidBatchError(ValueError):
    """The bytes are not a well-formed v2 record batch. ``corrupt`` is True when the CRC failed."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2^31 - 1 as Kafka's DefaultRecordBatch.incrementSequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``; raises InvalidBatchError when fewer than 61 bytes remain."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise InvalidBatchError("truncated record batch header")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def pack_header(header: BatchHeader) -> bytes:
    """The 61 bytes of ``header`` as a batch holds them (its ``crc`` field as given)."""
    return _HEADER.pack(*header)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch from its attributes field to its end."""
    view = memoryview(buf)[pos + ATTRIBUTES_POS : pos + size]
    return crc32c.crc32c(view)


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True) -> BatchHeader:
    """Check length, magic and CRC of the batch at ``pos``; return its header.

    Raises InvalidBatchError (``corrupt=True`` for a CRC mismatch) when the batch is not usable.
    """
    header = parse_header(buf, pos)
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatchError(f"batch length {header.batch_length} is below the v2 minimum")
    if header.size > len(buf) - pos:
        raise InvalidBatchError("record batch is truncated")
    if header.magic != MAGIC_V2:
        raise InvalidBatchError(f"unsupported record batch magic {header.magic}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidBatchError("negative record count or offset delta")
    if check_crc and compute_crc(buf, pos, header.size) != header.crc:
        raise InvalidBatchError("record batch CRC mismatch", corrupt=True)
    return header


def iter_headers(buf: bytes | bytearray | memoryview, *, check_crc: bool = False):
    """Yield ``(position, header)`` for each whole batch in ``buf``; stops before a truncated tail.

    Raises InvalidBatchError for a malformed batch (bad magic/length, or bad CRC when ``check_crc``).
    """
    pos = 0
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        size = _INT32.unpack_from(buf, pos + LENGTH_POS)[0] + LOG_OVERHEAD
        if size > end - pos:
            return
        header = validate_batch(buf, pos, check_crc=check_crc)
        yield pos, header
        pos += size


def holds_codec(buf: bytes | bytearray | memoryview, codec: int) -> bool:
    """Whether a whole batch of ``buf`` is compressed with ``codec`` (headers only; a malformed tail stops the
    look, for the log's own validation to refuse)."""
    try:
        return any(header.compression == codec for _, header in iter_headers(buf))
    except InvalidBatchError:
        return False


def unchecked_prefix(header: BatchHeader) -> bytes:
    """The first ``MAGIC_POS`` bytes of the batch ``header`` describes (base offset, length, leader epoch): what the
    CRC does not cover, so a broker may write its own in front of the producer's remaining bytes."""
    return _PREFIX.pack(header.base_offset, header.batch_length, header.partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the ``size``-byte batch at ``pos`` LogAppendTime with ``now_ms`` as its max timestamp, in place, and
    recompute its CRC (Kafka's RecordBatch.setMaxTimestamp; records keep their own deltas, which readers ignore
    for such a batch)."""
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_POS)[0] | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attributes)
    set_max_timestamp(buf, pos, size, now_ms)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Set the max timestamp of the ``size``-byte batch at ``pos`` in place and recompute its CRC."""
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    _UINT32.pack_into(buf, pos + CRC_POS, compute_crc(buf, pos, size))
