"""storage.log_validator: every record of a client batch checked on append, as Kafka's LogValidator does, within a
decompression budget, with bounded memory; compressed batches with wrong inner offsets rebuilt."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import cramjam
import pytest
from oncelog.protocol.records.batch import CRC_POS, BatchHeader, compute_crc, pack_header
from oncelog.protocol.records.codec import Record, SimpleRecord, decode_batch, encode_batch, encode_varint
from oncelog.protocol.records.compression import Compression, compress
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    RecordValidationError,
)
from oncelog.storage.log_validator import DecompressionBudget, validate_append
from support.opened_logs import OpenedLogs

NOW = 1_700_000_000_000
CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def record(
    offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"v", ts_delta: int = 0, tail: bytes = b""
) -> bytes:
    """One record's bytes; ``tail`` is appended inside the declared length (after the headers count)."""
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    for field in (key, value):
        body += encode_varint(-1) if field is None else encode_varint(len(field)) + field
    body += b"\x00" + tail
    return encode_varint(len(body)) + body


def batch(
    section: bytes,
    count: int,
    *,
    codec: int = Compression.NONE,
    last_offset_delta: int | None = None,
    timestamp: int = NOW,
    attributes: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
    compressed: bytes | None = None,
) -> bytes:
    """A v2 batch with a valid CRC around an arbitrary records ``section`` (compressed with ``codec``, or
    ``compressed`` as given)."""
    body = compressed if compressed is not None else (compress(codec, section) if codec else section)
    header = BatchHeader(
        0,
        61 - 12 + len(body),
        -1,
        2,
        0,
        attributes | codec,
        count - 1 if last_offset_delta is None else last_offset_delta,
        timestamp,
        timestamp,
        producer_id,
        0 if producer_id >= 0 else -1,
        base_sequence,
        count,
    )
    out = bytearray(pack_header(header) + body)
    struct.pack_into(">I", out, CRC_POS, compute_crc(out, 0, len(out)))
    return bytes(out)


def validate(buf: bytes, config: LogConfig | None = None, budget: DecompressionBudget | None = None):
    return validate_append(buf, config or LogConfig(), AppendOrigin.CLIENT, NOW, "t-0", budget)


@pytest.mark.parametrize("codec", CODECS)
def test_valid_batches_pass_unchanged(codec: int) -> None:
    data = encode_batch([SimpleRecord(b"k%d" % i, b"v" * i, timestamp=NOW) for i in range(50)], compression=codec)
    [checked] = validate(data)
    assert checked.header.records_count == 50 and not checked.rebuild


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_records_with_a_valid_crc_are_invalid_record(codec: int) -> None:
    with pytest.raises(RecordValidationError) as raised:
        validate(batch(b"\x0e" + b"\xff" * 40, 1, codec=codec))
    assert raised.value.record_errors == []


@pytest.mark.parametrize("codec", CODECS)
def test_record_count_disagreeing_with_the_records(codec: int) -> None:
    two = record(0) + record(1)
    with pytest.raises(RecordValidationError, match="declares 3 records but holds 2"):
        validate(batch(two, 3, codec=codec))
    with pytest.raises(RecordValidationError, match="remaining"):
        validate(batch(two + record(2), 2, codec=codec))


def test_record_length_that_disagrees_with_its_fields() -> None:
    with pytest.raises(RecordValidationError, match="Invalid record size"):
        validate(batch(record(0, tail=b"xx"), 1))
    with pytest.raises(RecordValidationError):
        validate(batch(encode_varint(200) + record(0)[1:], 1))


def test_trailing_bytes_after_the_records() -> None:
    with pytest.raises(RecordValidationError, match="remaining"):
        validate(batch(record(0) + b"\x00\x00", 1))


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD, Compression.LZ4])
def test_trailing_bytes_after_the_compressed_stream_are_corrupt(codec: int) -> None:
    stream = compress(codec, record(0)) + b"\x99garbage"
    with pytest.raises(CorruptRecordError):
        validate(batch(b"", 1, codec=codec, compressed=stream))


def test_uncompressed_offset_deltas_not_in_order_list_every_record() -> None:
    with pytest.raises(RecordValidationError) as raised:
        validate(batch(record(0) + record(0) + record(0), 3))
    assert [index for index, _ in raised.value.record_errors] == [1, 2]


@pytest.mark.parametrize("codec", CODECS[1:])
def test_compressed_offset_deltas_not_in_order_are_reassigned(tmp_path, codec: int, logs: OpenedLogs) -> None:
    data = batch(record(0, value=b"a") + record(0, value=b"b") + record(0, value=b"c"), 3, codec=codec)
    [checked] = validate(data)
    assert checked.rebuild
    log = logs.open(tmp_path / "t-0", LogConfig())
    result = log.append(data, now_ms=NOW)
    assert (result.first_offset, result.last_offset) == (0, 2)
    header, records = decode_batch(log.read(0, 1 << 20))
    assert header.compression == codec
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c")]
    log.close()


@pytest.mark.parametrize("source", CODECS)
def test_recompression_reassigns_offsets_and_never_raises_anything_else(
    tmp_path, source: int, logs: OpenedLogs
) -> None:
    log = logs.open(tmp_path / "t-0", LogConfig(compression_type="gzip"))
    deltas = [0, 0, 0] if source else [0, 1, 2]  # an uncompressed batch must already be in order
    data = batch(b"".join(record(d, value=bytes([65 + i])) for i, d in enumerate(deltas)), 3, codec=source)
    log.append(data, now_ms=NOW)
    header, records = decode_batch(log.read(0, 1 << 20))
    assert header.compression == Compression.GZIP
    assert [(r.offset, r.value) for r in records] == [(0, b"A"), (1, b"B"), (2, b"C")]
    with pytest.raises(RecordValidationError):
        log.append(batch(b"\x0e" + b"\xff" * 40, 1, codec=source), now_ms=NOW)
    log.close()


def test_recompressed_batch_above_max_message_bytes(tmp_path, logs: OpenedLogs) -> None:
    big = bytes(range(256)) * 64  # incompressible for snappy's 32 KiB blocks once zstd squeezed it
    data = encode_batch([SimpleRecord(b"k", big, timestamp=NOW) for _ in range(64)], compression=Compression.ZSTD)
    log = logs.open(tmp_path / "t-0", LogConfig(compression_type="uncompressed", max_message_bytes=100_000))
    with pytest.raises(RecordTooLargeError):
        log.append(data, now_ms=NOW)
    log.close()


def test_keyless_records_in_a_compacted_topic_list_every_index() -> None:
    section = record(0) + record(1, key=None) + record(2) + record(3, key=None) + record(4, key=None)
    with pytest.raises(RecordValidationError) as raised:
        validate(batch(section, 5), LogConfig(cleanup_policy=("compact",)))
    assert [index for index, _ in raised.value.record_errors] == [1, 3, 4]
    assert "without key" in raised.value.record_errors[0][1]
    validate(batch(section, 5))  # the same batch is fine on a non-compacted topic


def test_timestamps_outside_before_and_after_max_ms() -> None:
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    section = record(0, ts_delta=0) + record(1, ts_delta=-2000) + record(2, ts_delta=400) + record(3, ts_delta=900)
    with pytest.raises(InvalidTimestampError) as raised:
        validate(batch(section, 4), config)
    assert [index for index, _ in raised.value.record_errors] == [1, 3]
    assert str(raised.value) == "One or more records have been rejected due to invalid timestamp"  # Kafka's words
    # the default after.max.ms (Kafka 4.0: one hour) refuses a record two hours ahead
    with pytest.raises(InvalidTimestampError):
        validate(batch(record(0), 1, timestamp=NOW + 7_200_000))
    validate(batch(record(0), 1, timestamp=NOW - 10**10))  # before.max.ms defaults to Long.MAX_VALUE


def test_a_client_log_append_time_batch_is_invalid_timestamp() -> None:
    with pytest.raises(InvalidTimestampError) as raised:
        validate(batch(record(0) + record(1), 2, attributes=0x08), LogConfig(message_timestamp_type="LogAppendTime"))
    assert [index for index, _ in raised.value.record_errors] == [0, 1]


def test_batch_level_rules_from_a_client() -> None:
    with pytest.raises(RecordValidationError, match="Invalid sequence number"):
        validate(batch(record(0), 1, producer_id=7, base_sequence=-1))
    with pytest.raises(RecordValidationError, match="control records"):
        validate(batch(record(0), 1, attributes=0x20))
    with pytest.raises(RecordValidationError, match="Inconsistent"):
        validate(batch(record(0) + record(1), 2, last_offset_delta=5))


_TINY = record(0, value=None) * 1024  # valid records (offsets to be reassigned): only the budget stops them


def _zstd_bomb(size: int) -> tuple[int, bytes]:
    return Compression.ZSTD, bytes(cramjam.zstd.compress(_TINY * (size // len(_TINY)), level=19))


def _gzip_bomb(size: int) -> tuple[int, bytes]:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = _TINY * ((1 << 20) // len(_TINY))
    return Compression.GZIP, b"".join(comp.compress(chunk) for _ in range(size >> 20)) + comp.flush()


@pytest.mark.parametrize("make", [_zstd_bomb, _gzip_bomb])
def test_bombs_are_refused_within_the_budget_in_bounded_memory(make) -> None:
    codec, stream = make(64 << 20)
    bomb = batch(b"", (64 << 20) // 6, codec=codec, compressed=stream)
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            validate(bomb, budget=DecompressionBudget(2 << 20))  # small, for speed under tracemalloc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 << 20


def test_the_budget_is_shared_by_the_batches_of_a_request() -> None:
    section = b"".join(record(i, value=b"x" * 1000) for i in range(1000))  # ~1 MB inflated
    data = batch(section, 1000, codec=Compression.ZSTD)
    budget = DecompressionBudget(2_500_000)
    validate(data, budget=budget)
    validate(data, budget=budget)
    with pytest.raises(RecordTooLargeError):
        validate(data, budget=budget)


def test_many_tiny_compressed_records_validate_in_bounded_memory() -> None:
    records = [Record(i, NOW, b"k", None, []) for i in range(50_000)]
    data = encode_batch(records, compression=Compression.ZSTD)
    tracemalloc.start()
    try:
        [checked] = validate(data, LogConfig(cleanup_policy=("compact",)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert checked.header.records_count == 50_000
    assert peak < 2 << 20  # decoded into objects, 50,000 records would take ~10 MB


def test_coordinator_batches_get_structural_checks_only() -> None:
    keyless = batch(record(0, key=None), 1)
    validate_append(keyless, LogConfig(cleanup_policy=("compact",)), AppendOrigin.COORDINATOR, NOW, "t-0")


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_lying_max_timestamp_is_set_from_the_records(tmp_path, codec: int, logs: OpenedLogs) -> None:
    section = record(0, ts_delta=5) + record(1, ts_delta=40) + record(2, ts_delta=-3)
    data = bytearray(batch(section, 3, codec=codec))
    struct.pack_into(">q", data, 35, NOW + 10**9)  # maxTimestamp far ahead of every record (it holds retention)
    struct.pack_into(">I", data, CRC_POS, compute_crc(data, 0, len(data)))
    [checked] = validate(bytes(data))
    assert checked.max_timestamp_fixed and checked.header.max_timestamp == NOW + 40
    log = logs.open(tmp_path / "t-0", LogConfig())
    assert log.append(bytes(data), now_ms=NOW).max_timestamp == NOW + 40
    header, records = decode_batch(log.read(0, 1 << 20))  # CRC checked
    assert header.max_timestamp == NOW + 40 and [r.timestamp for r in records] == [NOW + 5, NOW + 40, NOW - 3]
    log.close()
