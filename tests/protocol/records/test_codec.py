"""Record batch encode/decode: golden bytes, round trips, corruption, truncation and fuzzing."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oncelog.protocol.records import (
    BatchHeader,
    Compression,
    InvalidBatchError,
    Record,
    SimpleRecord,
    decode_batch,
    encode_batch,
    iter_batches,
    iter_records,
)
from oncelog.protocol.records.codec import decode_varint, encode_varint
from support.record_strategies import simple_records


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def reseal(batch: bytes, body: bytes, *, count: int | None = None, attributes: int | None = None) -> bytes:
    """Replace a batch's records section (and optionally count/attributes), fixing length and CRC."""
    head = bytearray(batch[:61])
    struct.pack_into(">i", head, 8, 61 - 12 + len(body))
    if count is not None:
        struct.pack_into(">i", head, 57, count)
    if attributes is not None:
        struct.pack_into(">h", head, 21, attributes)
    out = bytearray(head + body)
    struct.pack_into(">I", out, 17, crc32c_reference(bytes(out[21:])))
    return bytes(out)


def test_reference_crc_matches_known_vector() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283


# Two records written by hand from the protocol guide. Record 1: offset delta 0, timestamp delta 0,
# key "k", value "v", one header "h" with a null value. Record 2: offset delta 1, timestamp delta +5,
# null key, empty value, no headers. Varints are zigzag: 1 -> 02, 5 -> 0a, -1 -> 01, 11 -> 16, 6 -> 0c.
GOLDEN_RECORDS = bytes.fromhex(
    "16 00 00 00 026b 0276 02 0268 01"  # length 11, attrs, tsΔ, offΔ, key, value, 1 header (h: null)
    " 0c 00 0a 02 01 00 00"  # length 6, attrs, tsΔ 5, offΔ 1, null key, empty value, 0 headers
)
GOLDEN_HEADER = bytes.fromhex(
    "0000000000000010"  # baseOffset 16
    "00000044"  # batchLength 68 = 49 + 19
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "00000000"  # crc, filled below
    "0000"  # attributes
    "00000001"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ed"  # maxTimestamp 1005
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordsCount
)


def golden_batch() -> bytes:
    raw = bytearray(GOLDEN_HEADER + GOLDEN_RECORDS)
    struct.pack_into(">I", raw, 17, crc32c_reference(bytes(raw[21:])))
    return bytes(raw)


GOLDEN_DECODED = [
    Record(16, 1000, b"k", b"v", [("h", None)]),
    Record(17, 1005, None, b"", []),
]


def test_golden_bytes_encode() -> None:
    records = [SimpleRecord(b"k", b"v", [("h", None)], 1000), SimpleRecord(None, b"", (), 1005)]
    assert encode_batch(records, base_offset=16) == golden_batch()
    assert encode_batch(GOLDEN_DECODED, base_offset=16) == golden_batch()


def test_golden_bytes_decode() -> None:
    header, records = decode_batch(golden_batch())
    assert records == GOLDEN_DECODED
    assert header.base_offset == 16 and header.records_count == 2 and header.last_offset_delta == 1
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1005)


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert decode_varint(raw + b"\xff", 0) == (value, len(raw))


SAMPLE = [
    SimpleRecord(b"key", b"value", [("h1", b"v1"), ("h2", None)], 1_700_000_000_000),
    SimpleRecord(None, b"null key", (), 1_700_000_000_005),
    # An earlier timestamp than the first record: a negative timestamp delta.
    SimpleRecord(b"null value", None, [("ключ-🔑", b"\x00\xff")], 1_699_999_999_990),
    SimpleRecord(None, None, [("", b"")], 1_700_000_000_001),
    SimpleRecord(b"", b"", (), 1_700_000_000_002),
    SimpleRecord(b"big", bytes(range(256)) * 400, [("x" * 300, b"y" * 1000)], 1_700_000_000_003),
]


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec: Compression) -> None:
    buf = encode_batch(
        SAMPLE,
        base_offset=1000,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=42,
        partition_leader_epoch=5,
    )
    header, records = decode_batch(buf)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 42)
    assert header.partition_leader_epoch == 5
    assert header.base_offset == 1000 and header.last_offset == 1005 and header.records_count == 6
    assert header.base_timestamp == SAMPLE[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in SAMPLE)
    assert not header.is_transactional and not header.is_control and header.timestamp_type == 0
    expected = [Record(1000 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(SAMPLE)]
    assert records == expected


def test_attribute_bits() -> None:
    header, _ = decode_batch(encode_batch(SAMPLE[:1], transactional=True, timestamp_type=1))
    assert header.is_transactional and header.timestamp_type == 1 and not header.is_control


def test_log_append_time_reports_max_timestamp_for_every_record() -> None:
    _, records = decode_batch(encode_batch(SAMPLE[:3], timestamp_type=1))
    assert {r.timestamp for r in records} == {max(r.timestamp for r in SAMPLE[:3])}


def test_records_with_offset_gaps_round_trip() -> None:
    records = [Record(10, 5, b"a", b"1", []), Record(13, 6, b"b", b"2", []), Record(20, 7, None, b"3", [])]
    header, decoded = decode_batch(encode_batch(records, base_offset=10))
    assert decoded == records and header.last_offset_delta == 10 and header.records_count == 3


def test_missing_timestamps_use_now() -> None:
    _, records = decode_batch(encode_batch([SimpleRecord(b"k", b"v")], now_ms=123456))
    assert records[0].timestamp == 123456


def test_empty_batch_is_not_encoded_but_decodes() -> None:
    with pytest.raises(ValueError):
        encode_batch([])
    # Compaction can leave a batch without records (Kafka keeps it for producer state); it decodes to [].
    empty = reseal(encode_batch(SAMPLE[:1]), b"", count=0)
    header, records = decode_batch(empty)
    assert records == [] and header.records_count == 0
    for codec in Compression:
        assert decode_batch(reseal(empty, b"", count=0, attributes=codec))[1] == []


def test_offsets_must_increase() -> None:
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, b"", []), Record(5, 0, None, b"", [])], base_offset=5)
    with pytest.raises(ValueError):
        encode_batch([Record(4, 0, None, b"", [])], base_offset=5)


def test_crc_corruption_is_detected_at_every_covered_byte() -> None:
    buf = encode_batch(SAMPLE[:3], compression=Compression.LZ4)
    for i in range(17, len(buf)):  # crc itself .. end
        bad = bytearray(buf)
        bad[i] ^= 0x01
        with pytest.raises(InvalidBatchError) as info:
            decode_batch(bytes(bad))
        assert info.value.corrupt, i


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    buf = bytearray(golden_batch())
    struct.pack_into(">q", buf, 0, 99)
    struct.pack_into(">i", buf, 12, 4)
    header, records = decode_batch(bytes(buf))
    assert header.partition_leader_epoch == 4
    assert [r.offset for r in records] == [99, 100]


@pytest.mark.parametrize("codec", list(Compression))
def test_truncation_at_every_byte_raises_invalid_batch_error(codec: Compression) -> None:
    buf = encode_batch(SAMPLE[:4], compression=codec)
    for cut in range(len(buf)):
        with pytest.raises(InvalidBatchError):
            decode_batch(buf[:cut])


@pytest.mark.parametrize("codec", list(Compression))
def test_truncated_records_section_with_valid_crc(codec: Compression) -> None:
    """A cut records section whose length and CRC were fixed up still fails, with InvalidBatchError only."""
    buf = encode_batch(SAMPLE[:4], compression=codec)
    body = buf[61:]
    for cut in range(len(body)):
        with pytest.raises(InvalidBatchError):
            decode_batch(reseal(buf, body[:cut]))


def test_count_disagreeing_with_records_is_rejected() -> None:
    buf = golden_batch()
    for count in (0, 1, 3, 2**31 - 1):
        with pytest.raises(InvalidBatchError):
            decode_batch(reseal(buf, GOLDEN_RECORDS, count=count))
    with pytest.raises(InvalidBatchError, match="remain"):
        decode_batch(reseal(buf, GOLDEN_RECORDS + b"\x00", count=2))


def test_unknown_compression_and_bad_magic() -> None:
    buf = golden_batch()
    with pytest.raises(InvalidBatchError):
        decode_batch(reseal(buf, GOLDEN_RECORDS, attributes=5))
    bad = bytearray(buf)
    bad[16] = 1
    with pytest.raises(InvalidBatchError):
        decode_batch(bytes(bad))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("0c 00 00 00 03 00 00", "invalid key length -2"),
        ("0c 00 00 00 01 05 00", "invalid value length -3"),
        ("0c 00 00 00 01 01 03", "invalid header count -2"),
        ("0c 00 00 00 01 01 7e", "invalid header count 63"),
        ("10 00 00 00 01 01 02 01 01", "invalid header key length -1"),
        ("12 00 00 00 01 01 02 02ff 01", "UTF-8"),
        ("0e 00 00 00 01 01 00 00", "fields use 6"),  # declared 7 bytes, fields use 6
        ("1e 00 ffffffffffffffffffffff 00 01 01 00", "varint longer than 10"),
        ("0c 00 00 00 0a 00 00", "key overruns"),
    ],
)
def test_malformed_record_fields(record: str, message: str) -> None:
    body = bytes.fromhex(record) + GOLDEN_RECORDS[12:]
    with pytest.raises(InvalidBatchError, match=message):
        decode_batch(reseal(golden_batch(), body))


def test_iter_over_several_batches_ignores_partial_tail() -> None:
    a = encode_batch(SAMPLE[:2], base_offset=0)
    b = encode_batch(SAMPLE[2:4], base_offset=2, compression=Compression.ZSTD)
    c = encode_batch(SAMPLE[4:], base_offset=4, compression=Compression.GZIP)
    for cut in (0, 1, 11, 12, 60, 61, 62, len(c) - 1):
        blob = a + b + c[:cut]
        assert [h.base_offset for h, _ in iter_batches(blob)] == [0, 2]
        assert [r.offset for _, r in iter_records(blob)] == [0, 1, 2, 3]
    got = list(iter_records(a + b + c))
    assert [r.offset for _, r in got] == list(range(6))
    assert all(isinstance(h, BatchHeader) for h, _ in got)
    assert [h.compression for h, _ in got] == [0, 0, 4, 4, 1, 1]


def test_iter_raises_on_a_corrupt_whole_batch() -> None:
    a = bytearray(encode_batch(SAMPLE[:2]))
    a[-1] ^= 0x40
    with pytest.raises(InvalidBatchError):
        list(iter_records(bytes(a) + encode_batch(SAMPLE[2:3], base_offset=2)))


def test_memoryview_and_position() -> None:
    buf = b"junk" + golden_batch()
    _header, records = decode_batch(memoryview(bytearray(buf)), 4)
    assert records == GOLDEN_DECODED


# --- property-based ----------------------------------------------------------------------------------------

records_st = simple_records(max_bytes=40, max_records=8)


@settings(max_examples=150, deadline=None)
@given(records_st, st.sampled_from(list(Compression)), st.integers(0, 2**40))
def test_property_round_trip(records: list[SimpleRecord], codec: Compression, base: int) -> None:
    header, decoded = decode_batch(encode_batch(records, base_offset=base, compression=codec))
    assert decoded == [Record(base + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]
    assert header.max_timestamp == max(r.timestamp for r in records)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(0, 400))
def test_fuzz_arbitrary_bytes_only_invalid_batch_error(data: bytes, pos: int) -> None:
    with contextlib.suppress(InvalidBatchError):
        decode_batch(data, min(pos, len(data)))
    with contextlib.suppress(InvalidBatchError):
        list(iter_records(data))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.integers(0, 7), st.integers(-2, 40))
def test_fuzz_sealed_records_section_only_invalid_batch_error(body: bytes, codec: int, count: int) -> None:
    """Arbitrary records sections behind a valid header and CRC reach the record parser and decompressors."""
    with contextlib.suppress(InvalidBatchError):
        decode_batch(reseal(golden_batch(), body, count=count, attributes=codec))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(Compression)[1:]), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255))))
def test_fuzz_mutated_compressed_batches(codec: Compression, flips: list[tuple[int, int]]) -> None:
    buf = encode_batch(SAMPLE[:4], compression=codec)
    body = bytearray(buf[61:])
    for where, value in flips:
        body[where % len(body)] = value
    with contextlib.suppress(InvalidBatchError):
        decode_batch(reseal(buf, bytes(body)))
