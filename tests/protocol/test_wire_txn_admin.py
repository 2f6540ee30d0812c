"""Transaction admin APIs (DescribeProducers, DescribeTransactions, ListTransactions) and AddPartitionsToTxn:
golden bytes written by hand from Kafka's message layouts, and the declared version ranges."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    DECLARED_VERSIONS,
    ApiKey,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import from_hex as h
from support.wire_samples import plain

# ListTransactions v1 request, header v2 (client_id "c", empty tags): state_filters ["Ongoing"],
# producer_id_filters [5], duration_filter 60000, empty tags.
LIST_TXNS_V1_REQ = h("0042 0001 00000001 0001 63 00  02 08 4f6e676f696e67  02 0000000000000005  000000000000ea60 00")

# DescribeTransactions v0 response, header v1 (correlation 7, empty tags): throttle 0, one state {error 0,
# id "tx", state "Ongoing", timeout 60000, start 1700000000000, pid 1000, epoch 5, topics [{"t", [0]}]}.
DESCRIBE_TXNS_V0_RESP = h("""
    00000007 00  00000000
    02  0000 03 7478 08 4f6e676f696e67 0000ea60 0000018bcfe56800 00000000000003e8 0005
        02 02 74 02 00000000 00
      00
    00
""")

# DescribeProducers v0 response: one topic "t", partition 0, no error, null message, one producer
# {pid 1000, epoch 5 as an INT32, last_sequence 9, last_timestamp 1700000000000, coordinator_epoch 2,
#  current_txn_start_offset -1}.
DESCRIBE_PRODUCERS_V0_RESP = h("""
    00000007 00  00000000
    02  02 74
        02  00000000 0000 00
            02  00000000000003e8 00000005 00000009 0000018bcfe56800 00000002 ffffffffffffffff 00
            00
        00
    00
""")

# AddPartitionsToTxn v3 request (flexible): id "tx", pid 1000, epoch 5, topics [{"t", [0, 1]}].
ADD_PARTITIONS_V3_REQ = h(
    "0018 0003 00000003 0001 63 00  03 7478 00000000000003e8 000502 02 74 03 00000000 00000001 00  00"
)


def test_list_transactions_v1_request() -> None:
    header = decode_request_header(LIST_TXNS_V1_REQ, DECLARED_VERSIONS)
    body = decode_request(header, LIST_TXNS_V1_REQ)
    assert plain(body) == {"state_filters": ["Ongoing"], "producer_id_filters": [5], "duration_filter": 60000}
    assert encode_request(ApiKey.LIST_TRANSACTIONS, 1, 1, "c", body) == LIST_TXNS_V1_REQ
    # v0 has no duration filter: it decodes as the default -1
    v0 = encode_request(ApiKey.LIST_TRANSACTIONS, 0, 1, "c", body)
    assert v0 == LIST_TXNS_V1_REQ[:2] + b"\x00\x00" + LIST_TXNS_V1_REQ[4:-9] + b"\x00"
    assert decode_request(decode_request_header(v0, DECLARED_VERSIONS), v0).duration_filter == -1


def test_describe_transactions_v0_response() -> None:
    body = {
        "throttle_time_ms": 0,
        "transaction_states": [
            {
                "error_code": 0,
                "transactional_id": "tx",
                "transaction_state": "Ongoing",
                "transaction_timeout_ms": 60000,
                "transaction_start_time_ms": 1700000000000,
                "producer_id": 1000,
                "producer_epoch": 5,
                "topics": [{"topic": "t", "partitions": [0]}],
            }
        ],
    }
    req = encode_request(ApiKey.DESCRIBE_TRANSACTIONS, 0, 7, None, {"transactional_ids": ["tx"]})
    header = decode_request_header(req, DECLARED_VERSIONS)
    assert decode_request(header, req).transactional_ids == ["tx"]
    assert encode_response(header, body) == DESCRIBE_TXNS_V0_RESP
    assert plain(decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, DESCRIBE_TXNS_V0_RESP)) == body


def test_describe_producers_v0_response_has_int32_epoch() -> None:
    producer = {
        "producer_id": 1000,
        "producer_epoch": 5,
        "last_sequence": 9,
        "last_timestamp": 1700000000000,
        "coordinator_epoch": 2,
        "current_txn_start_offset": -1,
    }
    body = {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": [producer]}
                ],
            }
        ],
    }
    req = encode_request(ApiKey.DESCRIBE_PRODUCERS, 0, 7, None, {"topics": [{"name": "t", "partition_indexes": [0]}]})
    header = decode_request_header(req, DECLARED_VERSIONS)
    assert plain(decode_request(header, req)) == {"topics": [{"name": "t", "partition_indexes": [0]}]}
    assert encode_response(header, body) == DESCRIBE_PRODUCERS_V0_RESP
    assert plain(decode_response(ApiKey.DESCRIBE_PRODUCERS, 0, DESCRIBE_PRODUCERS_V0_RESP)) == body
    # defaults: only the required fields given
    minimal = {
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "active_producers": [{"producer_id": 1000, "producer_epoch": 5, "coordinator_epoch": 2}],
                    }
                ],
            }
        ]
    }
    decoded = decode_response(ApiKey.DESCRIBE_PRODUCERS, 0, encode_response(header, minimal))
    got = decoded.topics[0].partitions[0].active_producers[0]
    assert (got.last_sequence, got.last_timestamp, got.current_txn_start_offset) == (-1, -1, -1)
    assert decoded.topics[0].partitions[0].error_message is None


def test_add_partitions_to_txn_v3_request() -> None:
    header = decode_request_header(ADD_PARTITIONS_V3_REQ, DECLARED_VERSIONS)
    body = decode_request(header, ADD_PARTITIONS_V3_REQ)
    assert plain(body) == {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 1000,
        "v3_and_below_producer_epoch": 5,
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
    }
    assert encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, 3, "c", body) == ADD_PARTITIONS_V3_REQ


def test_declared_ranges() -> None:
    assert DECLARED_VERSIONS[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)
    assert DECLARED_VERSIONS[ApiKey.DESCRIBE_TRANSACTIONS] == (0, 0)
    assert DECLARED_VERSIONS[ApiKey.LIST_TRANSACTIONS] == (0, 1)
    assert DECLARED_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 3)  # v4+ (KIP-890, broker-only) undeclared
    assert DECLARED_VERSIONS[ApiKey.FIND_COORDINATOR] == (0, 6)
    assert DECLARED_VERSIONS[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)
    assert DECLARED_VERSIONS[ApiKey.END_TXN] == (0, 5)
    assert DECLARED_VERSIONS[ApiKey.WRITE_TXN_MARKERS] == (0, 1)
    assert DECLARED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)


def test_add_partitions_to_txn_v4_is_unsupported() -> None:
    frame = ADD_PARTITIONS_V3_REQ[:2] + b"\x00\x04" + ADD_PARTITIONS_V3_REQ[4:]
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(frame, DECLARED_VERSIONS)
