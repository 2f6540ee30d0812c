"""The consumer's two record decoders (compiled and pure Python) on the same batches: same records, same errors."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oncelog.client import record_decode
from oncelog.client.fetch_parse import parse_partition
from oncelog.client.record_decode import (
    PADDING,
    PURE_RECORDS_ENV,
    choose_decoder,
    columns_compiled,
    columns_decoder,
    columns_pure,
    compiled_reader,
    decode_compiled,
    decode_pure,
)
from oncelog.client.types import ConsumerRecord, TopicPartition
from oncelog.protocol.records import (
    Compression,
    ControlType,
    InvalidBatchError,
    Record,
    SimpleRecord,
    encode_batch,
    encode_control_batch,
    iter_batches,
    iter_headers,
)
from support.record_strategies import simple_records

TP = TopicPartition("topic", 3)
DECODERS = {"pure": decode_pure, "compiled": decode_compiled}
COLUMN_DECODERS = {"pure": columns_pure, "compiled": columns_compiled}

SAMPLE = [
    SimpleRecord(b"key", b"value", [("h1", b"v1"), ("h2", None)], 1_700_000_000_000),
    SimpleRecord(None, b"null key", (), 1_700_000_000_005),
    SimpleRecord(b"null value", None, [("ключ-🔑", b"\x00\xff")], 1_699_999_999_990),  # a negative delta
    SimpleRecord(None, None, [("", b"")], 1_700_000_000_001),
    SimpleRecord(b"", b"", (), 1_700_000_000_002),
    SimpleRecord(b"big", bytes(range(256)) * 400, [("x" * 300, b"y" * 1000)], 1_700_000_000_003),
]


def reseal(batch: bytes, body: bytes, *, count: int | None = None) -> bytes:
    """``batch`` with its records section replaced (and optionally its count), length and CRC fixed."""
    out = bytearray(batch[:61] + body)
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def decode_all(decode: Callable, blob: bytes) -> list[ConsumerRecord]:
    """Every record of every whole batch of ``blob`` through ``decode``, as the consumer calls it."""
    buf = memoryview(blob)
    return [r for pos, header in iter_headers(buf, check_crc=True) for r in decode(buf, pos, header, TP)]


def reference(blob: bytes) -> list[ConsumerRecord]:
    """What protocol.records decodes, as ConsumerRecords."""
    return [
        ConsumerRecord(
            TP.topic, TP.partition, r.offset, r.timestamp, h.timestamp_type, r.key, r.value, tuple(r.headers)
        )
        for h, records in iter_batches(blob)
        for r in records
    ]


def test_the_compiled_reader_is_installed_and_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka's Cython reader is a test dependency: the compiled path must really run here, not fall back."""
    assert compiled_reader() is not None
    monkeypatch.delenv(PURE_RECORDS_ENV, raising=False)
    assert choose_decoder() is decode_compiled
    monkeypatch.setenv(PURE_RECORDS_ENV, "1")
    assert choose_decoder() is decode_pure


def columns_all(decode: Callable, blob: bytes) -> list[ConsumerRecord]:
    """Every record of every whole batch of ``blob`` through a column decoder, rebuilt as ConsumerRecords."""
    buf = memoryview(blob)
    out = []
    for pos, header in iter_headers(buf, check_crc=True):
        cols = decode(buf, pos, header)
        for offset, ts, key, value, headers in zip(*cols, strict=True):
            out.append(
                ConsumerRecord(TP.topic, TP.partition, offset, ts, header.timestamp_type, key, value, tuple(headers))
            )
    return out


def test_the_column_decoder_follows_the_record_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_decode, "_chosen", decode_compiled)
    assert columns_decoder() is columns_compiled
    monkeypatch.setattr(record_decode, "_chosen", decode_pure)
    assert columns_decoder() is columns_pure


def test_without_the_compiled_reader_the_pure_decoder_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PURE_RECORDS_ENV, raising=False)
    monkeypatch.setattr(record_decode, "compiled_reader", lambda: None)
    assert choose_decoder() is decode_pure


def batches() -> dict[str, bytes]:
    """Well-formed batches covering every field shape the decoders meet."""
    many = [SimpleRecord(None, b"x" * 100, (), 1_000 + i // 7) for i in range(9000)]  # 2- and 3-byte deltas
    out = {f"sample-{c.name}": encode_batch(SAMPLE, base_offset=1000, compression=c) for c in Compression}
    out["many"] = encode_batch(many, base_offset=2**40, producer_id=9, producer_epoch=1, base_sequence=0)
    out["log-append-time"] = encode_batch(SAMPLE[:3], timestamp_type=1, compression=Compression.LZ4)
    out["transactional"] = encode_batch(SAMPLE[:2], transactional=True, producer_id=4, producer_epoch=0)
    gaps = [Record(10, 5, b"a", b"1", []), Record(13, 6, b"b", b"2", []), Record(20, 7, None, b"3", [])]
    out["compacted-gaps"] = encode_batch(gaps, base_offset=10)
    out["empty-after-compaction"] = reseal(encode_batch(SAMPLE[:1]), b"", count=0)
    out["several"] = b"".join(
        encode_batch(SAMPLE[i : i + 2], base_offset=i, compression=c)
        for i, c in zip(range(0, 6, 2), (Compression.NONE, Compression.ZSTD, Compression.NONE), strict=True)
    )
    return out


@pytest.mark.parametrize("name", sorted(batches()))
def test_both_decoders_return_the_reference_records(name: str) -> None:
    blob = batches()[name]
    expected = reference(blob)
    assert decode_all(decode_pure, blob) == expected
    assert decode_all(decode_compiled, blob) == expected
    assert columns_all(columns_pure, blob) == expected
    assert columns_all(columns_compiled, blob) == expected
    # Read in place (another batch follows) and from a padded copy (the last batch): same records.
    assert decode_all(decode_compiled, blob + b"\x00" * PADDING) == expected


records_st = simple_records(max_bytes=300, max_records=20)


@settings(max_examples=150, deadline=None)
@given(records_st, st.sampled_from(list(Compression)), st.integers(0, 2**40), st.booleans())
def test_property_both_decoders_agree(records: list[SimpleRecord], codec: Compression, base: int, lat: bool) -> None:
    blob = encode_batch(records, base_offset=base, compression=codec, timestamp_type=int(lat))
    expected = reference(blob)
    assert decode_all(decode_pure, blob) == expected
    assert decode_all(decode_compiled, blob) == expected
    assert columns_all(columns_compiled, blob) == expected


GOLDEN = encode_batch([SimpleRecord(b"k", b"v", [("h", None)], 1000), SimpleRecord(None, b"", (), 1005)])
GOLDEN_SECOND = bytes.fromhex("0c 00 0a 02 01 00 00")  # the second record: null key, empty value, no header


@pytest.mark.parametrize(
    "record",
    [
        "0c 00 00 00 01 01 03",  # header count -2
        "0c 00 00 00 01 01 7e",  # header count 63
        "10 00 00 00 01 01 02 01 01",  # header key length -1
        "12 00 00 00 01 01 02 02ff 01",  # header key not UTF-8
        "0e 00 00 00 01 01 00 00",  # declared 7 bytes, the fields use 6
        "0c 00 00 00 0a 00 00",  # key overruns the record
        "0c 00 00 00 01 01 02 02",  # a header cut by the end of the batch
        "7e 00 00 00 01 01 00",  # record length beyond the batch
    ],
)
@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_malformed_records_raise_invalid_batch_error(record: str, decoder: str) -> None:
    body = bytes.fromhex(record) + GOLDEN_SECOND
    blob = reseal(GOLDEN, body)
    with pytest.raises(InvalidBatchError):
        decode_all(DECODERS[decoder], blob)
    with pytest.raises(InvalidBatchError):
        columns_all(COLUMN_DECODERS[decoder], blob)


@pytest.mark.parametrize("record", ["0c 00 00 00 03 00 00", "0c 00 00 00 01 05 00"])
def test_a_negative_length_below_minus_one(record: str) -> None:
    """The one difference on malformed input: the pure decoder refuses a key or value length below -1, the compiled
    one reads it as null, as Kafka's own consumer does (DefaultRecord.readFrom: ``if (keySize >= 0)``)."""
    blob = reseal(GOLDEN, bytes.fromhex(record) + GOLDEN_SECOND)
    with pytest.raises(InvalidBatchError, match=r"invalid (key|value) length"):
        decode_all(decode_pure, blob)
    first = decode_all(decode_compiled, blob)[0]
    assert (first.key, first.value) in ((None, b""), (None, None))


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_count_disagreeing_with_records_raises(decoder: str) -> None:
    body = GOLDEN[61:]
    for count in (0, 1, 3, 2**31 - 1):
        with pytest.raises(InvalidBatchError):
            decode_all(DECODERS[decoder], reseal(GOLDEN, body, count=count))
    with pytest.raises(InvalidBatchError):
        decode_all(DECODERS[decoder], reseal(GOLDEN, body + b"\x00", count=2))


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@pytest.mark.parametrize("codec", list(Compression))
def test_truncated_records_section_raises(decoder: str, codec: Compression) -> None:
    """A records section cut anywhere, behind a valid length and CRC, raises InvalidBatchError only."""
    buf = encode_batch(SAMPLE[:4], compression=codec)
    for cut in range(len(buf) - 61):
        with pytest.raises(InvalidBatchError):
            decode_all(DECODERS[decoder], reseal(buf, buf[61 : 61 + cut]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.integers(-2, 40), st.sampled_from([0, 1, 4]))
def test_fuzz_compiled_decoder_raises_only_invalid_batch_error(body: bytes, count: int, codec: int) -> None:
    """Arbitrary records sections behind a valid header and CRC: records or InvalidBatchError, nothing else."""
    batch = bytearray(reseal(GOLDEN, body, count=count))
    struct.pack_into(">h", batch, 21, codec)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    for decode in (decode_compiled, decode_pure):
        with contextlib.suppress(InvalidBatchError):
            decode_all(decode, bytes(batch))


def _transactions() -> bytes:
    """Offsets 0-1 producer 7 (aborted below), 2-3 producer 8, 4 ABORT(7), 5 COMMIT(8), 6 plain."""
    data = [SimpleRecord(None, b"v%d" % i, (), 1000) for i in range(2)]
    return b"".join(
        [
            encode_batch(data, base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
            encode_batch(data, base_offset=2, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True),
            encode_control_batch(
                ControlType.ABORT, coordinator_epoch=0, base_offset=4, producer_id=7, producer_epoch=0, timestamp_ms=1
            ),
            encode_control_batch(
                ControlType.COMMIT, coordinator_epoch=0, base_offset=5, producer_id=8, producer_epoch=0, timestamp_ms=1
            ),
            encode_batch(data[:1], base_offset=6),
        ]
    )


class _Aborted:
    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id, self.first_offset = producer_id, first_offset


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_parse_partition_is_the_same_with_either_decoder(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_decode, "_chosen", DECODERS[decoder])
    blob = _transactions()
    committed, nxt = parse_partition(TP, blob, 0, read_committed=True, aborted_transactions=[_Aborted(7, 0)])
    assert [r.offset for r in committed] == [2, 3, 6] and nxt == 7
    everything, _ = parse_partition(TP, blob, 1, read_committed=False)
    assert [r.offset for r in everything] == [1, 2, 3, 6]
    assert all(r.topic == TP.topic and r.partition == TP.partition for r in everything)


def test_a_malformed_batch_in_the_buffer_raises_after_the_records_before_it() -> None:
    """The consumer's buffer decodes as records are taken: the good batch's records come out first, then every take
    raises until the partition is sought past the bad batch."""
    from oncelog.client.consumer import _Fetched
    from oncelog.client.fetch_parse import select_batches

    good = encode_batch(SAMPLE[:2], base_offset=0)
    bad = reseal(encode_batch(SAMPLE[:2], base_offset=2), bytes.fromhex("0c 00 00 00 01 01 03") + GOLDEN_SECOND)
    selected, next_position = select_batches(good + bad, 0, read_committed=False)
    assert next_position == 4
    buffered = _Fetched(TP)
    buffered.add(selected)
    assert [r.offset for r in buffered.take(100)] == [0, 1]
    for _ in range(2):
        with pytest.raises(InvalidBatchError):
            buffered.take(100)
