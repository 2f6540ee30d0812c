"""Batches written by librdkafka (fixtures/, made by gen_librdkafka_fixtures.py against its mock cluster)."""

from __future__ import annotations

import json
import pathlib

import pytest
from oncelog.protocol.records import Compression, Record, decode_batch, encode_batch, iter_batches

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "librdkafka_expected.json").read_text())["records"]


def _expected() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    def unhex(v: str | None) -> bytes | None:
        return None if v is None else bytes.fromhex(v)

    return [(unhex(e["key"]), unhex(e["value"]), [(k, unhex(v)) for k, v in e["headers"]]) for e in EXPECTED]


@pytest.mark.parametrize("codec", list(Compression))
def test_decode_what_librdkafka_writes(codec: Compression) -> None:
    raw = (FIXTURES / f"librdkafka_{codec.name.lower()}.bin").read_bytes()
    batches = list(iter_batches(raw))
    assert all(h.compression == codec for h, _ in batches)
    assert all(h.producer_id >= 0 and h.base_sequence == 0 for h, _ in batches[:1])  # idempotent producer
    records = [r for _, rs in batches for r in rs]
    assert [(r.key, r.value, r.headers) for r in records] == _expected()
    assert [r.offset for r in records] == list(range(len(EXPECTED)))
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(len(EXPECTED))]


def test_uncompressed_encoding_is_byte_identical_to_librdkafka() -> None:
    raw = (FIXTURES / "librdkafka_none.bin").read_bytes()
    header, records = decode_batch(raw)
    assert header.size == len(raw)
    again = encode_batch(
        records,
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    assert again == raw


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_librdkafka_records_reencode_with_our_codecs(codec: Compression) -> None:
    raw = (FIXTURES / f"librdkafka_{codec.name.lower()}.bin").read_bytes()
    _header, records = decode_batch(raw)
    ours = encode_batch(records, compression=codec)
    assert decode_batch(ours)[1] == [Record(*r) for r in records]
