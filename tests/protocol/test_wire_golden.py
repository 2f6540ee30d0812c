"""Golden bytes written by hand from the Kafka protocol guide (not produced by our encoder)."""

from __future__ import annotations

import uuid

import pytest
from oncelog.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_v0_error_body,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import from_hex as h
from support.wire_samples import plain

# ApiVersions v0 request, header v1: key 18, version 0, correlation 1, client_id "ab"; empty body.
API_VERSIONS_V0_REQ = h("0012 0000 00000001 0002 6162")
# ApiVersions v0 response: correlation 1, error 0, api_keys [ {0, 0, 9} ] (int32 count).
API_VERSIONS_V0_RESP = h("00000001 0000 00000001 0000 0000 0009")
# ApiVersions v3 request, header v2 (client_id keeps its int16 length) + empty header tags, then compact
# strings "oncelog" and "1.0" and an empty tag section.
API_VERSIONS_V3_REQ = h("0012 0003 00000005 0002 6162 00  08 6f6e63656c6f67  04 312e30  00")
# ApiVersions v3 response: header v0 (no tags, KIP-511), error 0, compact array of 1 entry {18, 0, 3, tags 0},
# throttle 0, tags: 1 field, tag 1 (finalized_features_epoch), size 8, value 5.
API_VERSIONS_V3_RESP = h("00000005 0000 02 0012 0000 0003 00 00000000 01 01 08 0000000000000005")
# Metadata v1 request, header v1 with null client_id: topics ["a"].
METADATA_V1_REQ = h("0003 0001 00000002 ffff 00000001 0001 61")
# Metadata v1 request asking for all topics: null array.
METADATA_V1_ALL = h("0003 0001 00000002 ffff ffffffff")
# Produce v3: transactional_id null, acks -1, timeout 30000, [ "t": [ index 0, records 01 02 03 ] ].
PRODUCE_V3_REQ = h("0000 0003 00000009 0001 63  ffff ffff 0000753000000001 0001 74 00000001 00000000 00000003 010203")
# Metadata v9 request (flexible), header v2 with client_id "cli" and header tags {tag 7: 1 byte},
# topics compact [ {name "a", tags 0} ], allow_auto_topic_creation true,
# include_cluster_authorized_operations and include_topic_authorized_operations false,
# body tags {tag 5: 2 bytes abcd} (unknown tags, skipped).
METADATA_V9_REQ = h("0003 0009 00000003 0003 636c69 01 07 01 ff  02 02 61 00  01 00 00  01 05 02 abcd")


def test_api_versions_v0_request() -> None:
    header = decode_request_header(API_VERSIONS_V0_REQ)
    assert header == RequestHeader(ApiKey.API_VERSIONS, 0, 1, "ab", 12)
    body = decode_request(header, API_VERSIONS_V0_REQ)
    assert body.client_software_name == "" and body.client_software_version == ""
    assert encode_request(ApiKey.API_VERSIONS, 0, 1, "ab", {}) == API_VERSIONS_V0_REQ


def test_api_versions_v0_response() -> None:
    header = decode_request_header(API_VERSIONS_V0_REQ)
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}]}
    assert encode_response(header, body) == API_VERSIONS_V0_RESP
    decoded = decode_response(ApiKey.API_VERSIONS, 0, API_VERSIONS_V0_RESP)
    assert decoded.api_keys[0].max_version == 9
    assert decoded.throttle_time_ms == 0 and decoded.finalized_features_epoch == -1


def test_api_versions_v3_request_and_response() -> None:
    header = decode_request_header(API_VERSIONS_V3_REQ)
    assert header == RequestHeader(ApiKey.API_VERSIONS, 3, 5, "ab", 13)
    body = decode_request(header, API_VERSIONS_V3_REQ)
    assert (body.client_software_name, body.client_software_version) == ("oncelog", "1.0")
    assert encode_request(ApiKey.API_VERSIONS, 3, 5, "ab", body) == API_VERSIONS_V3_REQ
    resp = {
        "error_code": 0,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
        "throttle_time_ms": 0,
        "finalized_features_epoch": 5,
        "zk_migration_ready": False,
    }
    assert encode_response(header, resp) == API_VERSIONS_V3_RESP
    decoded = decode_response(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3_RESP)
    assert decoded.finalized_features_epoch == 5
    assert decoded.supported_features == [] and decoded.zk_migration_ready is False


def test_metadata_v1_request() -> None:
    header = decode_request_header(METADATA_V1_REQ)
    assert header == RequestHeader(ApiKey.METADATA, 1, 2, None, 10)
    body = decode_request(header, METADATA_V1_REQ)
    assert plain(body.topics) == [{"name": "a", "topic_id": uuid.UUID(int=0)}]
    assert body.allow_auto_topic_creation is True  # Kafka's default before v4
    assert encode_request(ApiKey.METADATA, 1, 2, None, {"topics": [{"name": "a"}]}) == METADATA_V1_REQ
    all_topics = decode_request(decode_request_header(METADATA_V1_ALL), METADATA_V1_ALL)
    assert all_topics.topics is None
    assert encode_request(ApiKey.METADATA, 1, 2, None, {"topics": None}) == METADATA_V1_ALL


def test_produce_v3_request() -> None:
    header = decode_request_header(PRODUCE_V3_REQ)
    assert header == RequestHeader(ApiKey.PRODUCE, 3, 9, "c", 11)
    body = decode_request(header, PRODUCE_V3_REQ)
    assert body.transactional_id is None and body.acks == -1 and body.timeout_ms == 30000
    assert body.topic_data[0].name == "t"
    assert body.topic_data[0].partition_data[0].records == b"\x01\x02\x03"
    again = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x01\x02\x03"}]}],
    }
    assert encode_request(ApiKey.PRODUCE, 3, 9, "c", again) == PRODUCE_V3_REQ


def test_flexible_metadata_v9_request_with_unknown_tags() -> None:
    header = decode_request_header(METADATA_V9_REQ)
    assert header == RequestHeader(ApiKey.METADATA, 9, 3, "cli", 17)
    body = decode_request(header, METADATA_V9_REQ)
    assert plain(body.topics) == [{"name": "a", "topic_id": uuid.UUID(int=0)}]
    assert body.allow_auto_topic_creation is True
    assert body.include_topic_authorized_operations is False
    # re-encoding drops the unknown tags: empty header and body tag sections
    assert encode_request(ApiKey.METADATA, 9, 3, "cli", body) == h(
        "0003 0009 00000003 0003 636c69 00  02 02 61 00  01 00 00  00"
    )


def test_response_header_v1_for_flexible_metadata() -> None:
    header = decode_request_header(METADATA_V9_REQ)
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": 1, "topics": []}
    # header v1: correlation 3 + empty tags; body: throttle, brokers [], cluster_id null, controller 1,
    # topics [], cluster_authorized_operations INT32_MIN (v8-10), tags.
    assert encode_response(header, body) == h("00000003 00  00000000 01 00 00000001 01 80000000 00")


def test_fetch_v12_request_cluster_id_tag() -> None:
    frame = h(
        "0001 000c 0000000b ffff 00"  # header v2, null client id
        "ffffffff 000001f4 00000001 00100000 01 00000000 ffffffff"  # replica, wait, min, max, iso, session
        "02 02 74 02 00000000 ffffffff 0000000000000064 ffffffff ffffffffffffffff 00010000 00 00"  # topics
        "01 01"  # forgotten [], rack_id ""
        "01 00 04 04616263"  # tags: tag 0 (cluster_id), 4 bytes: compact string "abc"
    )
    header = decode_request_header(frame)
    body = decode_request(header, frame)
    assert body.cluster_id == "abc" and body.isolation_level == 1 and body.max_bytes == 0x100000
    part = body.topics[0].partitions[0]
    assert (part.partition, part.fetch_offset, part.partition_max_bytes) == (0, 100, 65536)
    assert encode_request(ApiKey.FETCH, 12, 11, None, body) == frame


def test_unsupported_version_carries_partial_header() -> None:
    frame = h("0012 0004 0000002a 0002 6162 00 00 00 00")  # ApiVersions v4, which we do not advertise
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_header(frame)
    hdr = info.value.header
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 4, 42, "ab")
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_header(h("0100 0000 00000007"))  # unknown api key 256, no client id at all
    assert info.value.header.correlation_id == 7 and info.value.header.client_id is None
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(h("0001 0003 00000007 ffff"))  # Fetch v3 is below our minimum


def test_api_versions_v0_error_body() -> None:
    data = api_versions_v0_error_body(42, ErrorCode.UNSUPPORTED_VERSION)
    assert data[:6] == h("0000002a 0023")
    decoded = decode_response(ApiKey.API_VERSIONS, 0, data)
    assert decoded.error_code == 35
    assert {e.api_key: (e.min_version, e.max_version) for e in decoded.api_keys}[18] == (0, 3)
    assert {e.api_key: (e.min_version, e.max_version) for e in decoded.api_keys} == SUPPORTED_VERSIONS


def test_error_codes() -> None:
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and not ErrorCode.UNSUPPORTED_VERSION.retriable
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.CONCURRENT_TRANSACTIONS.retriable and not ErrorCode.PRODUCER_FENCED.retriable
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS == 14 and ErrorCode.INVALID_PRODUCER_EPOCH == 47
    assert ErrorCode.TRANSACTION_ABORTABLE == 120 and not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER.retriable
    assert ApiKey.INIT_PRODUCER_ID == 22 and ApiKey.DESCRIBE_CONFIGS == 32 and ApiKey.TXN_OFFSET_COMMIT == 28
