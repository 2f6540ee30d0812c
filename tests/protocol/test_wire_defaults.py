"""Version-agnostic objects: later-version fields take defaults on decode; encoding ignores extra fields."""

from __future__ import annotations

import uuid

import pytest
from oncelog.protocol import (
    ApiKey,
    EncodeError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


def _roundtrip_request(key: ApiKey, version: int, body: dict) -> object:
    frame = encode_request(key, version, 1, "c", body)
    return decode_request(decode_request_header(frame), frame)


def test_fetch_v4_request_defaults() -> None:
    body = _roundtrip_request(
        ApiKey.FETCH,
        4,
        {
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 1000,
            "isolation_level": 1,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 10, "partition_max_bytes": 99}]}],
            "session_id": 77,
            "rack_id": "ignored in v4",
        },
    )
    assert body.isolation_level == 1 and body.max_bytes == 1000
    assert body.session_id == 0 and body.session_epoch == -1  # v7+
    assert body.rack_id == "" and body.cluster_id is None and body.forgotten_topics_data == []
    assert body.replica_state == {"replica_id": -1, "replica_epoch": -1}
    part = body.topics[0].partitions[0]
    assert part.current_leader_epoch == -1 and part.log_start_offset == -1 and part.last_fetched_epoch == -1
    assert body.topics[0].topic_id == uuid.UUID(int=0)


def test_produce_response_v0_defaults() -> None:
    frame = encode_request(ApiKey.PRODUCE, 0, 5, "c", {"acks": 1, "timeout_ms": 1, "topic_data": []})
    header = decode_request_header(frame)
    data = encode_response(
        header,
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {
                            "index": 0,
                            "error_code": 0,
                            "base_offset": 42,
                            "log_append_time_ms": 123,
                            "error_message": "x",
                        }
                    ],
                }
            ],
            "throttle_time_ms": 9,
        },
    )
    body = decode_response(ApiKey.PRODUCE, 0, data)
    part = body.responses[0].partition_responses[0]
    assert part.base_offset == 42
    assert part.log_append_time_ms == -1 and part.log_start_offset == -1  # v2+ / v5+
    assert part.record_errors == [] and part.error_message is None
    assert part.current_leader == {"leader_id": -1, "leader_epoch": -1}
    assert body.throttle_time_ms == 0 and body.node_endpoints == []


def test_metadata_v0_request_defaults_and_missing_fields_on_encode() -> None:
    body = _roundtrip_request(ApiKey.METADATA, 0, {})  # every field missing -> defaults
    assert body.topics == [] and body.allow_auto_topic_creation is True
    assert body.include_topic_authorized_operations is False


def test_defaults_are_fresh_objects() -> None:
    a = _roundtrip_request(ApiKey.METADATA, 0, {})
    b = _roundtrip_request(ApiKey.METADATA, 0, {})
    a.topics.append("x")
    assert b.topics == []


def test_tagged_field_written_only_when_not_default() -> None:
    frame = encode_request(ApiKey.FETCH, 12, 1, None, {"cluster_id": None})
    with_tag = encode_request(ApiKey.FETCH, 12, 1, None, {"cluster_id": "abc"})
    # empty section 00 -> count 01, tag 00, size 04, compact string 04 'abc'
    assert with_tag[-7:] == bytes.fromhex("01 00 04 04616263") and len(with_tag) == len(frame) + 6
    assert frame.endswith(b"\x00")


def test_bad_values_raise_encode_error() -> None:
    with pytest.raises(EncodeError):
        encode_request(ApiKey.PRODUCE, 3, 1, "c", {"acks": 70000})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.PRODUCE, 3, 1, "c", {"topic_data": [{"name": 5}]})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.PRODUCE, 12, 1, "c", {})
