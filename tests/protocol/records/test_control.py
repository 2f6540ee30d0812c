"""Transaction marker (control) batches."""

from __future__ import annotations

import struct

import pytest
from oncelog.protocol.records import (
    ControlType,
    InvalidBatchError,
    control_record_type,
    decode_batch,
    decode_control_record,
    encode_control_batch,
)


@pytest.mark.parametrize("control_type", list(ControlType))
def test_control_batch_round_trip(control_type: ControlType) -> None:
    buf = encode_control_batch(
        control_type,
        producer_id=4711,
        producer_epoch=9,
        coordinator_epoch=3,
        timestamp_ms=1234,
        base_offset=50,
    )
    header, records = decode_batch(buf)
    assert header.is_control and header.is_transactional
    assert header.compression == 0 and header.base_sequence == -1
    assert (header.producer_id, header.producer_epoch) == (4711, 9)
    assert header.base_offset == 50 and header.records_count == 1 and header.last_offset_delta == 0
    assert header.attributes == 0x30
    (record,) = records
    assert record.offset == 50 and record.timestamp == 1234 and record.headers == []
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 3)
    assert decode_control_record(record.key, record.value) == (control_type, 3)


def test_control_record_is_read_as_kafka_does() -> None:
    # A newer key/value version still parses (Kafka reads the leading fields of any version >= 0).
    assert decode_control_record(struct.pack(">hh", 1, 1) + b"x", struct.pack(">hi", 2, -1) + b"y") == (
        ControlType.COMMIT,
        -1,
    )
    assert control_record_type(struct.pack(">hh", 0, 2)) == 2  # LEADER_CHANGE: not a txn marker


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, struct.pack(">hi", 0, 1)),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", -1, 0), struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)),
        (struct.pack(">hh", 0, 1), None),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x01"),
        (struct.pack(">hh", 0, 0), struct.pack(">hi", -3, 1)),
    ],
)
def test_malformed_control_records(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(InvalidBatchError):
        decode_control_record(key, value)
