"""``__consumer_offsets`` record codec: Kafka's byte layouts, round trips, tombstones, bad input."""

from __future__ import annotations

import struct

import pytest
from oncelog.protocol import DecodeError, EncodeError
from oncelog.protocol.internal.group_log import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_key_golden_bytes() -> None:
    data = encode_offset_key("g", "t", 3)
    assert data == struct.pack(">h", 1) + _s("g") + _s("t") + struct.pack(">i", 3)
    assert decode_key(data) == OffsetKey("g", "t", 3)
    assert decode_key(encode_offset_key("g", "t", 3, version=0)) == OffsetKey("g", "t", 3)


def test_group_key_golden_bytes() -> None:
    assert encode_group_key("grp") == struct.pack(">h", 2) + _s("grp")
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")


def test_offset_value_v3_golden_bytes_and_v1_with_expire() -> None:
    value = OffsetValue(offset=42, metadata="m", commit_timestamp_ms=1000, leader_epoch=5)
    data = encode_offset_value(value)
    assert data == struct.pack(">hqi", 3, 42, 5) + _s("m") + struct.pack(">q", 1000)
    assert decode_offset_value(data) == value
    expiring = OffsetValue(offset=1, metadata="", commit_timestamp_ms=10, expire_timestamp_ms=99)
    v1 = encode_offset_value(expiring)
    assert v1[:2] == struct.pack(">h", 1)
    assert decode_offset_value(v1) == expiring
    assert decode_offset_value(None) is None


def test_group_value_round_trip_and_v0_rebalance_timeout() -> None:
    member = MemberValue("m-1", "client", "/127.0.0.1", 10000, 30000, b"sub", b"assign", "inst")
    value = GroupValue("consumer", 7, "range", "m-1", 123, (member,))
    assert decode_group_value(encode_group_value(value)) == value
    v0 = decode_group_value(encode_group_value(value, version=0))
    assert v0 is not None and v0.members[0].rebalance_timeout_ms == 10000 and v0.members[0].group_instance_id is None
    empty = GroupValue("consumer", 8, None, None, 5, ())
    assert decode_group_value(encode_group_value(empty)) == empty
    assert decode_group_value(None) is None


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">h", 9) + _s("g"), encode_offset_key("g", "t", 1) + b"x"])
def test_bad_keys(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_key(data)


def test_bad_values() -> None:
    with pytest.raises(DecodeError):
        decode_offset_value(struct.pack(">h", 7))
    with pytest.raises(DecodeError):
        decode_group_value(encode_group_value(GroupValue("c", 1, None, None))[:-1])
    with pytest.raises(EncodeError):
        encode_offset_value(OffsetValue(1), version=9)
