"""The __transaction_state record key and value: hand-written golden bytes, round trips, rejections."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oncelog.protocol.errors import DecodeError, EncodeError
from oncelog.protocol.internal.transaction_log import (
    TxnLogValue,
    TxnState,
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_key,
    encode_txn_log_value,
)
from support.wire_samples import from_hex as h

# Key v0: version 0, string "txn-1" with an int16 length.
KEY = h("0000 0005 74786e2d31")

# Value v0: producer_id 1000, epoch 5, timeout 60000, status 1 (Ongoing), partitions [("t", [0, 3])] with int32
# counts and an int16-length topic, last update 1700000000123, start 1700000000000.
VALUE_V0 = h("""
    0000
    00000000000003e8  0005  0000ea60  01
    00000001  0001 74  00000002 00000000 00000003
    0000018bcfe5687b
    0000018bcfe56800
""")

# Value v0 in state Empty: the partition array is null (-1 count).
VALUE_V0_EMPTY = h("0000 00000000000003e8 0005 0000ea60 00 ffffffff 0000018bcfe5687b ffffffffffffffff")

# Value v1 (flexible), state PrepareCommit: compact array (count+1 = 2) of one struct {compact string "t",
# compact [int32] (count+1 = 3) 0, 3, empty tag section}, timestamps, then the top-level tag section with
# 3 fields: tag 0 (previous_producer_id 999) size 8, tag 1 (next_producer_id 1001) size 8, tag 2
# (client_transaction_version 2) size 2.
VALUE_V1 = h("""
    0001
    00000000000003e8  0005  0000ea60  02
    02  02 74  03 00000000 00000003  00
    0000018bcfe5687b
    0000018bcfe56800
    03  00 08 00000000000003e7  01 08 00000000000003e9  02 02 0002
""")

ONGOING = TxnLogValue(
    producer_id=1000,
    producer_epoch=5,
    transaction_timeout_ms=60000,
    state=TxnState.ONGOING,
    partitions={"t": [0, 3]},
    last_update_timestamp_ms=1700000000123,
    start_timestamp_ms=1700000000000,
)


def test_key_golden_bytes() -> None:
    assert encode_txn_log_key("txn-1") == KEY
    assert decode_txn_log_key(KEY) == "txn-1"
    assert decode_txn_log_key(memoryview(KEY)) == "txn-1"


def test_value_v0_golden_bytes() -> None:
    assert encode_txn_log_value(ONGOING) == VALUE_V0
    decoded = decode_txn_log_value(VALUE_V0)
    assert decoded == ONGOING
    assert decoded is not None and decoded.state is TxnState.ONGOING
    assert (decoded.previous_producer_id, decoded.next_producer_id, decoded.client_transaction_version) == (-1, -1, 0)


def test_value_v0_empty_writes_null_partitions() -> None:
    empty = TxnLogValue(1000, 5, 60000, TxnState.EMPTY, {}, 1700000000123, -1)
    assert encode_txn_log_value(empty) == VALUE_V0_EMPTY
    assert decode_txn_log_value(VALUE_V0_EMPTY) == empty


def test_value_v1_golden_bytes_with_tagged_fields() -> None:
    value = TxnLogValue(
        1000,
        5,
        60000,
        TxnState.PREPARE_COMMIT,
        {"t": [0, 3]},
        1700000000123,
        1700000000000,
        previous_producer_id=999,
        next_producer_id=1001,
        client_transaction_version=2,
    )
    assert encode_txn_log_value(value, version=1) == VALUE_V1
    assert decode_txn_log_value(VALUE_V1) == value


def test_value_v1_omits_default_tags_and_v0_drops_them() -> None:
    v1 = encode_txn_log_value(ONGOING, version=1)
    assert v1[:2] == b"\x00\x01" and v1[-1:] == b"\x00"  # empty top-level tag section
    assert decode_txn_log_value(v1) == ONGOING
    with_tags = dataclasses.replace(ONGOING, previous_producer_id=7, next_producer_id=8)
    assert encode_txn_log_value(with_tags) == VALUE_V0  # v0 has no place for them


def test_tombstone() -> None:
    assert decode_txn_log_value(None) is None


def test_empty_state_ignores_listed_partitions_on_decode_and_refuses_them_on_encode() -> None:
    # Status byte of VALUE_V0 switched to Empty: Kafka ignores the partitions in that state.
    data = bytearray(VALUE_V0)
    data[16] = 0
    decoded = decode_txn_log_value(bytes(data))
    assert decoded is not None and decoded.state is TxnState.EMPTY and decoded.partitions == {}
    with pytest.raises(EncodeError):
        encode_txn_log_value(TxnLogValue(1, 0, 1, TxnState.EMPTY, {"t": [0]}, 0, -1))


def test_repeated_topics_and_partitions_are_merged() -> None:
    value = TxnLogValue(1, 0, 1, TxnState.ONGOING, {"a": [1, 1, 2]}, 0, 0)
    data = encode_txn_log_value(value)
    # Build "a": [1, 1, 2] followed by a second "a": [2, 5] by hand from the v0 layout.
    twice = data[:17] + h("00000002 0001 61 00000003 00000001 00000001 00000002 0001 61 00000002 00000002 00000005")
    twice += data[-16:]
    decoded = decode_txn_log_value(twice)
    assert decoded is not None and decoded.partitions == {"a": [1, 2, 5]}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        h("0001 0005 74786e2d31"),
        KEY[:-1],
        KEY + b"\x00",
        h("0000 0002 ff fe"),
        h("0000 ffff"),
    ],
)
def test_bad_keys_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_txn_log_key(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        h("0002") + VALUE_V0[2:],
        h("ffff") + VALUE_V0[2:],
        VALUE_V0[:-1],
        VALUE_V0 + b"\x00",
        VALUE_V0[:16] + b"\x08" + VALUE_V0[17:],
        VALUE_V1[:-3],
        h("0001") + VALUE_V0[2:],
    ],
)
def test_bad_values_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_txn_log_value(data)


@pytest.mark.parametrize(
    "value",
    [
        TxnLogValue(2**63, 0, 1, TxnState.ONGOING, {}, 0, 0),
        TxnLogValue(1, 2**15, 1, TxnState.ONGOING, {}, 0, 0),
        TxnLogValue(1, 0, 1, 8, {}, 0, 0),
        TxnLogValue(1, 0, 1, TxnState.ONGOING, {"t": [2**31]}, 0, 0),
    ],
)
def test_bad_values_raise_encode_error(value: TxnLogValue) -> None:
    with pytest.raises(EncodeError):
        encode_txn_log_value(value)


def test_unknown_value_version_is_refused_on_encode() -> None:
    with pytest.raises(EncodeError):
        encode_txn_log_value(ONGOING, version=2)


def test_state_codes_and_names_match_kafka() -> None:
    assert {s.kafka_name: int(s) for s in TxnState} == {
        "Empty": 0,
        "Ongoing": 1,
        "PrepareCommit": 2,
        "PrepareAbort": 3,
        "CompleteCommit": 4,
        "CompleteAbort": 5,
        "Dead": 6,
        "PrepareEpochFence": 7,
    }
    assert TxnState.from_kafka_name("PrepareAbort") is TxnState.PREPARE_ABORT
    assert TxnState.from_kafka_name("ongoing") is None


_INT16 = st.integers(-(2**15), 2**15 - 1)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _values(draw: st.DrawFn) -> tuple[TxnLogValue, int]:
    version = draw(st.sampled_from([0, 1]))
    state = draw(st.sampled_from(list(TxnState)))
    partitions = (
        {}
        if state is TxnState.EMPTY
        else draw(st.dictionaries(st.text(max_size=8), st.lists(_INT32, unique=True, max_size=4), max_size=3))
    )
    tags = (draw(_INT64), draw(_INT64), draw(_INT16)) if version == 1 else (-1, -1, 0)
    value = TxnLogValue(draw(_INT64), draw(_INT16), draw(_INT32), state, partitions, draw(_INT64), draw(_INT64), *tags)
    return value, version


@given(_values(), st.text(max_size=30))
def test_round_trip(case: tuple[TxnLogValue, int], transactional_id: str) -> None:
    value, version = case
    data = encode_txn_log_value(value, version=version)
    assert int.from_bytes(data[:2], "big") == version
    assert decode_txn_log_value(data) == value
    assert decode_txn_log_key(encode_txn_log_key(transactional_id)) == transactional_id


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    for decode in (decode_txn_log_key, decode_txn_log_value):
        with contextlib.suppress(DecodeError):
            decode(data)
