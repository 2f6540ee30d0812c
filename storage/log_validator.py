"""Kafka's LogValidator for v2 record batches: every record of every batch checked once, on append, before any is
written, streaming through compressed batches with bounded memory and time.

Batch checks (the ``header`` of each batch; Kafka's UnifiedLog.analyzeAndValidateRecords and
LogValidator.validateBatch):
- size at most max.message.bytes (RecordTooLargeError, MESSAGE_TOO_LARGE); length, magic 2 and CRC-32C
  (CorruptRecordError / InvalidRecordError, CORRUPT_MESSAGE); from a client: a record count above 0 equal to
  lastOffsetDelta + 1, no control batch, a base sequence >= 0 when a producer id is set (RecordValidationError,
  INVALID_RECORD).

Record checks (DefaultRecord.readFrom and LogValidator.validateRecord), each record read from its varint fields:
- structure: exactly ``recordsCount`` records, each using exactly its declared length, key / value lengths -1 or
  within the record, header counts and header key lengths >= 0, nothing after the last record (in a compressed
  batch: in the decompressed stream, and nothing after the compressed stream). A violation stops the batch at once
  (RecordValidationError, INVALID_RECORD, without per-record errors, as Kafka's InvalidRecordException from the
  record iterator); a compressed stream that does not decode is CORRUPT_MESSAGE.
- per record, every violating record listed (Produce v8+ ``record_errors``, KIP-467): a keyless record in a
  compacted topic and, in an uncompressed batch, an offset delta other than the record's index (INVALID_RECORD); a
  CreateTime timestamp outside [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]
  (KIP-937), or a LogAppendTime batch from a client (InvalidTimestampError, INVALID_TIMESTAMP, which wins over
  INVALID_RECORD as in Kafka's processRecordErrors).

Offsets: :func:`validate_and_assign` (Kafka's validateMessagesAndAssignOffsets) is the one path a leader's append
takes: it validates as above, then gives the batches their offsets from the log end, the appending leader's epoch
(``partitionLeaderEpoch``) and, for message.timestamp.type=LogAppendTime, the append time. A compressed batch
whose offset deltas are not 0..n-1 is rebuilt with them reassigned, as Kafka's
validateMessagesAndAssignOffsetsCompressed does (``ValidatedBatch.rebuild``); so is every data batch whose codec
differs from compression.type (:func:`rebuild_batch`). Kafka stores an uncompressed batch's deltas unchecked; this
broker refuses wrong ones (they make consumers see repeated offsets).

Bounds: compressed batches inflate piece by piece (``compression.iter_decompressed``), never all at once; the
records of a piece are checked and dropped, so memory beyond the request is one piece (at most 4 MiB) plus the
largest record. A :class:`DecompressionBudget` shared by the batches of a request caps the bytes inflated per request
(``DECOMPRESSION_BUDGET_BYTES``): a batch that would pass it is refused with MESSAGE_TOO_LARGE, before inflating what
a frame header already shows to be too much. Time is linear in the request's bytes plus its inflated bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from oncelog.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatchError,
    compute_crc,
    pack_header,
    parse_header,
    set_log_append_time,
    set_max_timestamp,
    unchecked_prefix,
    validate_batch,
)
from oncelog.protocol.records.codec import decode_varint, encode_varint, read_varint_tail
from oncelog.protocol.records.compression import (
    Compression,
    DecompressionError,
    DecompressionLimitError,
    StreamCompressor,
    iter_decompressed,
)
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    RecordValidationError,
    UnexpectedAppendOffsetError,
)

#: Bytes a request's compressed batches may inflate to, all batches together. Kafka has no such cap (it streams,
#: and checks a record in nanoseconds); here checking costs about 1 us per record, so this bounds the time one
#: Produce request may take (about 2.5 s in the worst case, 16 MiB of 7-byte records) and what the compaction
#: worker decodes of one batch. 16 MiB is 16 times message.max.bytes' default and above what producers' requests
#: inflate to (librdkafka and the Java producer cap a request at 1 MB compressed by default; librdkafka's batch.size
#: caps a batch's uncompressed bytes at 1 MB). The Java producer splits a batch answered MESSAGE_TOO_LARGE.
DECOMPRESSION_BUDGET_BYTES = 16 * 1024 * 1024
#: Kafka's RecordBatch.NO_TIMESTAMP.
NO_TIMESTAMP = -1
#: Most ``record_errors`` one partition's answer lists (the first invalid records; the message gives the total).
#: Kafka lists all; a batch of more invalid records than this is hostile (librdkafka's batch.num.messages default
#: is 10000) and would otherwise cost the broker ~250 bytes of memory per listed record.
RECORD_ERRORS_LIMIT = 65536
_MIN_RECORD_BODY = 6  # attributes, timestampDelta, offsetDelta, keyLength, valueLength, headersCount: 1 byte each
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


class DecompressionBudget:
    """Bytes still allowed to inflate for one request; shared by the appends it makes."""

    def __init__(self, limit: int = DECOMPRESSION_BUDGET_BYTES) -> None:
        self.limit = limit
        self.remaining = limit

    def take(self, size: int) -> None:
        """Account ``size`` inflated bytes; RecordTooLargeError when the request's budget is spent."""
        self.remaining -= size
        if self.remaining < 0:
            raise RecordTooLargeError(
                f"compressed records inflate beyond the {self.limit} bytes a produce request may decompress"
            )


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    """A batch of the appended bytes that passed every check; ``rebuild`` when its inner offsets need reassigning."""

    position: int
    header: BatchHeader
    rebuild: bool = False
    #: The header's maxTimestamp was not its records' largest timestamp: ``header`` holds the right one, which the
    #: stored batch must get (Kafka's LogValidator sets it from the records).
    max_timestamp_fixed: bool = False


@dataclass(slots=True)
class _Rules:
    """What a batch's records are checked against (per append)."""

    compacted: bool
    create_time: bool
    earliest: int
    latest: int
    partition: str
    keyless: str = ""
    errors: list[tuple[int, str]] = field(default_factory=list)
    #: Invalid records found in the batch, listed in ``errors`` or not (beyond RECORD_ERRORS_LIMIT).
    error_count: int = 0
    timestamp_error: bool = False
    #: Largest timestamp delta of the batch's records walked so far.
    max_delta: int = NO_TIMESTAMP

    def add(self, index: int, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < RECORD_ERRORS_LIMIT:
            self.errors.append((index, message))


def validate_append(
    buf: bytes | bytearray | memoryview,
    config: LogConfig,
    origin: AppendOrigin,
    now_ms: int,
    partition: str,
    budget: DecompressionBudget | None = None,
) -> list[ValidatedBatch]:
    """Check every batch and record of an append (see the module docstring); return the batches in order.

    Raises CorruptRecordError, InvalidRecordError, RecordValidationError (``record_errors`` lists every invalid
    record of the first batch holding any), InvalidTimestampError or RecordTooLargeError; never anything else.
    Coordinator appends (transaction markers, offsets, group metadata) get the structural checks only.
    """
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("no record batches")
    if budget is None:
        budget = DecompressionBudget()
    client = origin is AppendOrigin.CLIENT
    rules = _Rules(
        compacted=client and config.compacts,
        create_time=not config.log_append_time,
        earliest=now_ms - config.message_timestamp_before_max_ms,
        latest=now_ms + config.message_timestamp_after_max_ms,
        partition=partition,
        keyless=f"Compacted topic cannot accept message without key in topic partition {partition}",  # as Kafka 4.1
    )
    validated = []
    pos = 0
    while pos < end:
        header = _validate_header(buf, pos, config, client, partition)
        rebuild = fixed = False
        if client and not header.is_control:
            rebuild = _validate_records(buf, pos, header, rules, budget)
            if header.timestamp_type == 0 and header.max_timestamp != header.base_timestamp + rules.max_delta:
                header = header._replace(max_timestamp=header.base_timestamp + rules.max_delta)
                fixed = True
        validated.append(ValidatedBatch(pos, header, rebuild, fixed))
        pos += header.size
    return validated


def validate_replicated(buf: bytes | bytearray | memoryview, partition: str) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of the whole batches a follower fetched from its leader, which validated their records
    already (Kafka's analyzeAndValidateRecords for the REPLICATION origin): length, magic and CRC of each, offsets
    increasing from batch to batch. A partial batch at the end (a fetch response may end with one) is left out.

    Raises CorruptRecordError (CRC), InvalidRecordError (bad length or magic) or UnexpectedAppendOffsetError (a batch
    whose last offset is not above the one before it); never anything else. Size limits are not applied: the leader
    accepted the batches (Kafka's ignoreRecordSize).
    """
    headers: list[tuple[int, BatchHeader]] = []
    end = len(buf)
    pos = 0
    last_offset = -1
    while end - pos >= BATCH_HEADER_SIZE and parse_header(buf, pos).size <= end - pos:
        try:
            header = validate_batch(buf, pos)
        except InvalidBatchError as exc:
            if exc.corrupt:
                raise CorruptRecordError(f"{exc} in topic partition {partition}") from exc
            raise InvalidRecordError(f"{exc} in topic partition {partition}") from exc
        if header.last_offset <= last_offset:
            raise UnexpectedAppendOffsetError(
                f"Out of order offsets found in append to {partition}: batch {header.base_offset}.."
                f"{header.last_offset} after offset {last_offset}"
            )
        last_offset = header.last_offset
        headers.append((pos, header))
        pos += header.size
    return headers


def _validate_header(
    buf: bytes | bytearray | memoryview, pos: int, config: LogConfig, client: bool, partition: str
) -> BatchHeader:
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise InvalidRecordError("trailing partial record batch")
    size = parse_header(buf, pos).size
    if size > config.max_message_bytes:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds message.max.bytes {config.max_message_bytes}")
    try:
        header = validate_batch(buf, pos)
    except InvalidBatchError as exc:
        if exc.corrupt:
            raise CorruptRecordError(str(exc)) from exc
        raise InvalidRecordError(str(exc)) from exc
    if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
        raise RecordValidationError(
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
            f"{header.records_count} in topic partition {partition}"
        )
    if client:
        if header.is_control:
            raise RecordValidationError(f"Clients are not allowed to write control records to {partition}")
        if header.has_producer_id and header.base_sequence < 0:
            raise RecordValidationError(
                f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                f"{header.producer_id} in topic partition {partition}"
            )
    return header


def _validate_records(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, rules: _Rules, budget: DecompressionBudget
) -> bool:
    """Check the records of the client data batch at ``pos``; return whether its inner offsets need reassigning."""
    rules.errors = []
    rules.error_count = 0
    rules.timestamp_error = False
    rules.max_delta = NO_TIMESTAMP - header.base_timestamp
    count = header.records_count
    log_append_batch = header.timestamp_type == 1
    # Kafka's validateTimestamp: a LogAppendTime batch's records all carry its max timestamp; a client may not
    # send one to a LogAppendTime topic, nor one without a timestamp to a CreateTime topic.
    check_each = rules.create_time and not log_append_batch
    if log_append_batch:
        ts = header.max_timestamp
        if not rules.create_time or ts == NO_TIMESTAMP:
            _all_records(
                rules, count, lambda _: "Invalid timestamp type in message. Producer should not set LogAppendTime."
            )
        elif not rules.earliest <= ts <= rules.latest:
            _all_records(rules, count, lambda index: _timestamp_message(ts, header.base_offset + index, rules))
    body = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    try:
        if header.compression == Compression.NONE:
            start, end = pos + BATCH_HEADER_SIZE, pos + header.size
            walked, index, in_order = _walk(buf, start, end, count, 0, True, header, rules, check_each)
            if index != count:
                raise InvalidBatchError(f"batch declares {count} records but holds {index}")
            if walked != end:
                raise InvalidBatchError("Incorrect declared batch size, records still remaining in batch")
            if not in_order:
                _offset_delta_errors(bytes(body), count, rules)
            rebuild = False
        else:
            rebuild = not _walk_compressed(body, header, rules, budget, check_each)
    except DecompressionLimitError as exc:
        raise RecordTooLargeError(f"{exc} (a produce request may inflate {budget.limit} bytes)") from exc
    except DecompressionError as exc:
        raise CorruptRecordError(f"{rules.partition}: {exc}") from exc
    except InvalidBatchError as exc:
        raise RecordValidationError(f"{exc} in topic partition {rules.partition}") from exc
    except IndexError:
        raise RecordValidationError(f"Found invalid record structure in topic partition {rules.partition}") from None
    if rules.errors:
        errors = sorted(dict(reversed(rules.errors)).items())  # one per record, the first found
        if rules.timestamp_error:  # Kafka's LogValidator.processRecordErrors, messages included
            raise InvalidTimestampError(
                "One or more records have been rejected due to invalid timestamp", record_errors=errors
            )
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in errors[:3])
        raise RecordValidationError(
            f"One or more records have been rejected due to {rules.error_count} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]",
            record_errors=errors,
        )
    return rebuild


def _all_records(rules: _Rules, count: int, message: Callable[[int], str]) -> None:
    rules.timestamp_error = True
    for index in range(count):
        rules.add(index, message(index))


def _timestamp_message(ts: int, offset: int, rules: _Rules) -> str:
    """Kafka's LogValidator message; ``offset`` is the record's offset as the producer sent it (before assignment)."""
    return (
        f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp should be within "
        f"[{rules.earliest}, {rules.latest}]"
    )


def _walk_compressed(
    body: memoryview, header: BatchHeader, rules: _Rules, budget: DecompressionBudget, check_each: bool
) -> bool:
    """Check a compressed batch's records piece by piece; return whether its offset deltas are 0..n-1."""
    count = header.records_count
    index = 0
    in_order = True
    pending = b""
    pieces = iter_decompressed(header.compression, body, max_size=max(budget.remaining, 0))
    for piece in pieces:
        budget.take(len(piece))
        data = pending + piece if pending else piece
        walked, index, ordered = _walk(data, 0, len(data), count, index, False, header, rules, check_each)
        in_order = in_order and ordered
        pending = data[walked:]
        if index == count and pending:
            break
    walked, index, ordered = _walk(pending, 0, len(pending), count, index, True, header, rules, check_each)
    in_order = in_order and ordered
    if index != count:
        raise InvalidBatchError(f"batch declares {count} records but holds {index}")
    if walked != len(pending) or next(pieces, b""):
        raise InvalidBatchError("Incorrect declared batch size, records still remaining in the decompressed stream")
    return in_order


#: Zigzag value of a one-byte varint by its byte (None: the varint goes on).
_ONE = [((b >> 1) ^ -(b & 1)) if b < 0x80 else None for b in range(256)]
#: Zigzag value of a two-byte varint by ``first | second << 8`` (None: not a two-byte varint).
_TWO: list[int | None] = [None] * 65536
for _first in range(0x80, 0x100):
    for _second in range(0x80):
        _z = (_first & 0x7F) | (_second << 7)
        _TWO[_first | (_second << 8)] = (_z >> 1) ^ -(_z & 1)


def _walk(
    data: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    count: int,
    index: int,
    final: bool,
    header: BatchHeader,
    rules: _Rules,
    check_each: bool,
) -> tuple[int, int, bool]:
    """Check the records from ``index`` on that lie whole in ``data[pos:end]`` (all of them when ``final``: then a
    record cut short is an error); return (position after the last one, next index, offset deltas in order).

    The hot loop of the produce path: one pass over each record's varint fields (one- and two-byte varints by table
    lookup), keys and values skipped. A read past ``data`` raises IndexError (the caller's "invalid structure").
    """
    one = _ONE
    two = _TWO
    tail = read_varint_tail
    in_order = True
    max_delta = rules.max_delta
    compacted = rules.compacted
    earliest = rules.earliest - header.base_timestamp  # bounds on the timestamp delta itself
    latest = rules.latest - header.base_timestamp
    no_timestamp = NO_TIMESTAMP - header.base_timestamp
    stop = end if final else end - _MAX_VARINT_BYTES + 1  # short of a whole length varint: wait for more
    min_body = _MIN_RECORD_BODY
    while index < count and pos < stop:
        length = one[data[pos]]
        if length is not None:
            p = pos + 1
        else:
            length = two[data[pos] | data[pos + 1] << 8] if pos + 1 < end else None
            if length is not None:
                p = pos + 2
            else:
                length, p = tail(data, pos + 1, data[pos], _MAX_VARINT_BYTES)
        rec_end = p + length
        if rec_end > end:
            if final:
                raise InvalidBatchError(f"record {index} declares {length} bytes, beyond the end of the batch")
            break
        if length < min_body:
            raise InvalidBatchError(f"Invalid record size {length} of record {index}")
        p += 1  # attributes (unused)
        ts_delta = one[data[p]]
        if ts_delta is not None:
            p += 1
        else:
            ts_delta, p = tail(data, p + 1, data[p], _MAX_VARLONG_BYTES)
        offset_delta = one[data[p]]
        if offset_delta is not None:
            p += 1
        else:
            offset_delta = two[data[p] | data[p + 1] << 8]
            if offset_delta is not None:
                p += 2
            else:
                offset_delta, p = tail(data, p + 1, data[p], _MAX_VARINT_BYTES)
        if offset_delta != index:
            in_order = False
        if ts_delta > max_delta:
            max_delta = ts_delta
        size = one[data[p]]
        if size is not None:
            p += 1
        else:
            size = two[data[p] | data[p + 1] << 8]
            if size is not None:
                p += 2
            else:
                size, p = tail(data, p + 1, data[p], _MAX_VARINT_BYTES)
        if size > 0:
            p += size
        elif size < 0:
            if size != -1:
                raise InvalidBatchError(f"Invalid key size {size} of record {index}")
            if compacted:
                rules.add(index, rules.keyless)
                ts_delta = no_timestamp  # Kafka reports the key, not also the timestamp
        size = one[data[p]]
        if size is not None:
            p += 1
        else:
            size = two[data[p] | data[p + 1] << 8]
            if size is not None:
                p += 2
            else:
                size, p = tail(data, p + 1, data[p], _MAX_VARINT_BYTES)
        if size > 0:
            p += size
        elif size < -1:
            raise InvalidBatchError(f"Invalid value size {size} of record {index}")
        if data[p]:
            p = _skip_headers(data, p, rec_end, index)
        else:
            p += 1
        if p != rec_end:
            raise InvalidBatchError(
                f"Invalid record size: expected to read {length} bytes in record payload, but instead read "
                f"{length + p - rec_end}"
            )
        if check_each and (ts_delta < earliest or ts_delta > latest) and ts_delta != no_timestamp:
            rules.timestamp_error = True
            rules.add(
                index, _timestamp_message(header.base_timestamp + ts_delta, header.base_offset + offset_delta, rules)
            )
        pos = rec_end
        index += 1
    rules.max_delta = max_delta
    return pos, index, in_order


def _skip_headers(data: bytes, p: int, rec_end: int, index: int) -> int:
    count, p = decode_varint(data, p, _MAX_VARINT_BYTES)
    if count < 0:
        raise InvalidBatchError(f"Found invalid number of record headers {count} in record {index}")
    for _ in range(count):
        size, p = decode_varint(data, p, _MAX_VARINT_BYTES)
        if size < 0:
            raise InvalidBatchError(f"Invalid negative header key size {size} in record {index}")
        p += size
        size, p = decode_varint(data, p, _MAX_VARINT_BYTES)
        if size < -1:
            raise InvalidBatchError(f"Invalid header value size {size} in record {index}")
        if size > 0:
            p += size
        if p > rec_end:
            break
    return p


def _offset_delta_errors(data: bytes, count: int, rules: _Rules) -> None:
    """List each record of a (structurally valid) uncompressed batch whose offset delta is not its index."""
    for index, (_start, _delta_at, _delta_end, delta) in enumerate(_record_offsets(data, count)):
        if delta != index:
            rules.add(index, f"Record offset delta {delta} is not its index {index} in {rules.partition}")


def _record_offsets(data: bytes, count: int) -> Iterator[tuple[int, int, int, int]]:
    """For each record of a structurally valid records section: (start, offset delta start, its end, delta)."""
    pos = 0
    for _ in range(count):
        length, p = decode_varint(data, pos, _MAX_VARINT_BYTES)
        start = p
        rec_end = p + length
        p += 1
        _ts, p = read_varint_tail(data, p + 1, data[p], _MAX_VARLONG_BYTES) if data[p] >= 0x80 else (0, p + 1)
        delta_at = p
        delta, p = decode_varint(data, p, _MAX_VARINT_BYTES)
        yield start, delta_at, p, delta
        pos = rec_end


def rebuild_batch(
    buf: bytes | bytearray | memoryview, batch: ValidatedBatch, codec: int, max_message_bytes: int
) -> bytes:
    """The validated batch in ``codec`` with its records' offset deltas 0..n-1, every other field kept (Kafka's
    buildRecordsAndAssignOffsets; keys, values, headers and timestamp deltas byte for byte). Streams: one piece
    of records inflated and re-deflated at a time. Raises RecordTooLargeError when the result would exceed
    ``max_message_bytes``, CorruptRecordError if the records no longer decode; nothing else."""
    header = batch.header
    body = memoryview(buf)[batch.position + BATCH_HEADER_SIZE : batch.position + header.size]
    compressor = None if codec == Compression.NONE else StreamCompressor(codec)
    plain: list[bytes] = []
    try:
        pieces = (
            iter([bytes(body)])
            if header.compression == Compression.NONE
            else iter_decompressed(header.compression, body, max_size=DECOMPRESSION_BUDGET_BYTES)
        )
        pending = b""
        index = 0
        for piece in pieces:
            data = pending + piece if pending else piece
            out, walked, index = _renumber(data, index, header.records_count)
            pending = data[walked:]
            if compressor is None:
                plain.append(out)
                size = sum(map(len, plain))
            else:
                compressor.feed(out)
                size = compressor.compressed_size
            if size + BATCH_HEADER_SIZE > max_message_bytes:
                raise RecordTooLargeError(
                    f"batch rewritten with {Compression(codec).name.lower()} exceeds message.max.bytes "
                    f"{max_message_bytes}"
                )
        if index != header.records_count or pending:
            raise InvalidBatchError("records changed while rebuilding the batch")
    except (InvalidBatchError, IndexError) as exc:
        raise CorruptRecordError(f"cannot rebuild the batch: {exc}") from exc
    records = b"".join(plain) if compressor is None else compressor.finish()
    size = BATCH_HEADER_SIZE + len(records)
    if size > max_message_bytes:
        raise RecordTooLargeError(f"batch of {size} bytes rewritten exceeds message.max.bytes {max_message_bytes}")
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    out = bytearray(pack_header(header._replace(batch_length=size - LOG_OVERHEAD, attributes=attributes, crc=0)))
    out += records
    out[CRC_POS : CRC_POS + 4] = compute_crc(out, 0, size).to_bytes(4, "big")
    return bytes(out)


def _renumber(data: bytes, index: int, count: int) -> tuple[bytes, int, int]:
    """The whole records at the start of ``data`` with offset deltas from ``index``; (bytes, consumed, next index)."""
    parts: list[bytes] = []
    pos = 0
    end = len(data)
    view = memoryview(data)
    while index < count and pos < end:
        try:
            length, p = decode_varint(data, pos, _MAX_VARINT_BYTES)
        except IndexError:
            break
        rec_end = p + length
        if rec_end > end:
            break
        q = p + 1
        _ts, q = read_varint_tail(data, q + 1, data[q], _MAX_VARLONG_BYTES) if data[q] >= 0x80 else (0, q + 1)
        delta_at = q
        _delta, q = decode_varint(data, q, _MAX_VARINT_BYTES)
        delta = encode_varint(index)
        parts.append(encode_varint(length - (q - delta_at) + len(delta)))
        parts.append(view[p:delta_at].tobytes())
        parts.append(delta)
        parts.append(view[q:rec_end].tobytes())
        pos = rec_end
        index += 1
    return b"".join(parts), pos, index


@dataclass(slots=True)
class AssignedAppend:
    """An append validated and given its offsets: ``buf`` holds the batches (rebuilt or stamped when needed), at the
    positions of ``headers``, whose unchecked prefix (base offset, length, leader epoch) ``pieces`` rewrites."""

    buf: bytes | bytearray | memoryview
    headers: list[tuple[int, BatchHeader]]
    #: Largest maxTimestamp of the batches.
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.headers[-1][1].next_offset

    def pieces(self) -> list[bytes | memoryview]:
        """The batches as pieces to write, none of them copied: each batch's unchecked prefix rebuilt from its header
        (the offsets and leader epoch given), then the rest of the batch as it came."""
        view = memoryview(self.buf)
        pieces: list[bytes | memoryview] = []
        for pos, header in self.headers:
            pieces.append(unchecked_prefix(header))
            pieces.append(view[pos + MAGIC_POS : pos + header.size])
        return pieces


def validate_and_assign(
    buf: bytes | bytearray | memoryview,
    config: LogConfig,
    origin: AppendOrigin,
    now_ms: int,
    partition: str,
    *,
    next_offset: int,
    leader_epoch: int,
    budget: DecompressionBudget | None = None,
) -> AssignedAppend:
    """Validate a leader's append (:func:`validate_append`, raising what it raises), rebuild the batches whose inner
    offsets or codec must change (:func:`rebuild_batch`, in compression.type), set lying maxTimestamps from the
    records, then give the batches offsets from ``next_offset``, ``leader_epoch`` and, for LogAppendTime topics,
    ``now_ms`` as their timestamp. ``buf`` itself is never modified."""
    batches = validate_append(buf, config, origin, now_ms, partition, budget)
    codec = config.compression_codec
    validated: list[tuple[int, BatchHeader]]
    if any(_needs_rebuild(batch, codec) for batch in batches):
        buf, validated = _rebuilt(buf, batches, codec, config.max_message_bytes)
    else:
        validated = [(batch.position, batch.header) for batch in batches]
        if any(batch.max_timestamp_fixed for batch in batches):
            buf = bytearray(buf)  # a lying maxTimestamp is set from the records, in place
            for batch in batches:
                if batch.max_timestamp_fixed:
                    set_max_timestamp(buf, batch.position, batch.header.size, batch.header.max_timestamp)
    log_append_time = config.log_append_time
    if log_append_time and not isinstance(buf, bytearray):
        buf = bytearray(buf)  # stamped in place
    headers = []
    max_timestamp = NO_TIMESTAMP
    for pos, header in validated:
        header = header._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch)
        if log_append_time:
            set_log_append_time(buf, pos, header.size, now_ms)
            header = header._replace(attributes=header.attributes | TIMESTAMP_TYPE_MASK, max_timestamp=now_ms)
        headers.append((pos, header))
        next_offset = header.next_offset
        max_timestamp = max(max_timestamp, header.max_timestamp)
    return AssignedAppend(buf, headers, max_timestamp)


def _needs_rebuild(batch: ValidatedBatch, codec: int | None) -> bool:
    """Whether a data batch needs new inner offsets or is not in ``codec`` (compression.type; None: any)."""
    header = batch.header
    return not header.is_control and (batch.rebuild or (codec is not None and header.compression != codec))


def _rebuilt(
    buf: bytes | bytearray | memoryview, batches: list[ValidatedBatch], codec: int | None, max_message_bytes: int
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The batches with each one ``_needs_rebuild`` names rebuilt by :func:`rebuild_batch`, in ``codec`` (None: its
    own)."""
    out = bytearray()
    headers = []
    for batch in batches:
        header = batch.header
        data: bytes | memoryview = memoryview(buf)[batch.position : batch.position + header.size]
        if _needs_rebuild(batch, codec):
            target = header.compression if codec is None else codec
            data = rebuild_batch(buf, batch, target, max_message_bytes)
        headers.append((len(out), parse_header(data)))
        out += data
    return out, headers


__all__ = [
    "DECOMPRESSION_BUDGET_BYTES",
    "AssignedAppend",
    "DecompressionBudget",
    "ValidatedBatch",
    "rebuild_batch",
    "validate_and_assign",
    "validate_append",
    "validate_replicated",
]
