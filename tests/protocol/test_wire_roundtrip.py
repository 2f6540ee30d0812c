"""Round trips for every declared (API, version), request and response, compiled and interpreted."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    DECLARED_VERSIONS,
    SCHEMAS,
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import expected, plain, sample

CASES = [(key, v) for key, (lo, hi) in sorted(DECLARED_VERSIONS.items()) for v in range(lo, hi + 1)]


def test_supported_is_subset_of_declared() -> None:
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        dlo, dhi = DECLARED_VERSIONS[key]
        assert dlo <= lo <= hi <= dhi, key


def test_advertised_versions_change_only_on_purpose() -> None:
    assert SUPPORTED_VERSIONS == {
        ApiKey.API_VERSIONS: (0, 3),
        ApiKey.METADATA: (0, 12),  # v10-12: topic ids (KIP-516)
        ApiKey.PRODUCE: (0, 10),  # v10: KIP-951 current leader on NOT_LEADER_OR_FOLLOWER
        ApiKey.FETCH: (4, 13),  # v13: topics by id
        ApiKey.LIST_OFFSETS: (1, 7),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.CREATE_TOPICS: (0, 7),  # v7: the new topic's id
        ApiKey.DELETE_TOPICS: (0, 6),  # v6: topics by id
        ApiKey.DESCRIBE_CONFIGS: (0, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.FIND_COORDINATOR: (0, 4),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
        ApiKey.END_TXN: (0, 5),
        ApiKey.WRITE_TXN_MARKERS: (0, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.JOIN_GROUP: (0, 7),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 4),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 7),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.TXN_OFFSET_COMMIT: (0, 3),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    }


@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize(("key", "version"), CASES)
def test_request_round_trip(key: ApiKey, version: int, variant: int) -> None:
    schema = SCHEMAS[key][0]
    body = sample(schema.fields, version, variant)
    frame = encode_request(key, version, 42, "client-ü", body)
    header = decode_request_header(frame, DECLARED_VERSIONS)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        42,
        "client-ü",
    )
    decoded = decode_request(header, frame)
    assert plain(decoded) == expected(schema.fields, version, body)
    # canonical: re-encoding the decoded object gives the same bytes
    assert encode_request(key, version, 42, "client-ü", decoded) == frame
    # the interpreted (uncompiled) construct agrees with the compiled one
    interp = schema.construct(version, compiled=False)
    assert plain(interp.parse(frame[header.header_size :])) == plain(decoded)
    assert interp.build(body) == frame[header.header_size :]


@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize(("key", "version"), CASES)
def test_response_round_trip(key: ApiKey, version: int, variant: int) -> None:
    schema = SCHEMAS[key][1]
    body = sample(schema.fields, version, variant)
    req = encode_request(key, version, 7, None, {})
    header = decode_request_header(req, DECLARED_VERSIONS)
    data = encode_response(header, body)
    assert int.from_bytes(data[:4], "big") == 7
    decoded = decode_response(key, version, data)
    assert plain(decoded) == expected(schema.fields, version, body)
    assert encode_response(header, decoded) == data
    interp = schema.construct(version, compiled=False)
    body_bytes = schema.construct(version).build(body)
    assert interp.build(body) == body_bytes
    assert plain(interp.parse(body_bytes)) == plain(decoded)


def test_decoded_container_has_attribute_access() -> None:
    body = {
        "acks": 1,
        "timeout_ms": 5,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": memoryview(b"abc")}]}],
    }
    frame = encode_request(ApiKey.PRODUCE, 7, 1, "c", body)
    decoded = decode_request(decode_request_header(frame), frame)
    assert decoded.topic_data[0].partition_data[0].index == 3
    assert decoded["topic_data"][0]["partition_data"][0]["records"] == b"abc"
    assert decoded.transactional_id is None


def test_records_accept_bytearray_and_memoryview() -> None:
    for records in (bytearray(b"\x01\x02"), memoryview(b"\x01\x02"), b"\x01\x02"):
        body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
        frame = encode_request(ApiKey.PRODUCE, 9, 1, "c", body)
        decoded = decode_request(decode_request_header(frame), frame)
        assert decoded.topic_data[0].partition_data[0].records == b"\x01\x02"
