"""DescribeLogDirs, the ACL APIs, ElectLeaders, the partition reassignment APIs and DescribeClientQuotas: golden bytes
written by hand from Kafka's message layouts (clients/src/main/resources/common/message/*.json), and the versions
declared (Kafka 4.0's ranges)."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    DECLARED_VERSIONS,
    ApiKey,
    decode_response,
    encode_request,
)
from support.wire_samples import decode_frame as _request
from support.wire_samples import from_hex as h
from support.wire_samples import plain
from support.wire_samples import response_bytes as _response_bytes


@pytest.mark.parametrize(
    ("key", "versions"),
    [
        (ApiKey.DESCRIBE_LOG_DIRS, (1, 4)),  # KIP-896 removed v0 in 4.0; v5 (KIP-1066) is later
        (ApiKey.DESCRIBE_ACLS, (1, 3)),
        (ApiKey.CREATE_ACLS, (1, 3)),
        (ApiKey.DELETE_ACLS, (1, 3)),
        (ApiKey.ELECT_LEADERS, (0, 2)),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, (0, 0)),  # v1 (KIP-860) is Kafka 4.1's
        (ApiKey.LIST_PARTITION_REASSIGNMENTS, (0, 0)),
        (ApiKey.DESCRIBE_CLIENT_QUOTAS, (0, 1)),
    ],
)
def test_declared_versions(key: ApiKey, versions: tuple[int, int]) -> None:
    assert DECLARED_VERSIONS[key] == versions


# ------------------------------------------------------------------------------------------------ DescribeLogDirs
# v1 request (classic), header v1 with client_id "c": topics [{"t", partitions [0, 1]}].
LOG_DIRS_V1_REQ = h("0023 0001 00000001 0001 63  00000001 0001 74 00000002 00000000 00000001")
# v1 request: topics null (every partition).
LOG_DIRS_V1_ALL_REQ = h("0023 0001 00000001 0001 63  ffffffff")
# v2 request (flexible), header v2 (empty tags): topics null (compact 0), tags.
LOG_DIRS_V2_ALL_REQ = h("0023 0002 00000001 0001 63 00  00 00")
# v1 response, header v0 (correlation 7): throttle 0, results [{error 0, "/d", topics [{"t", partitions [{0,
# size 100, lag 0, future false}]}]}] -- no top-level error (v3+), no volume sizes (v4+).
LOG_DIRS_V1_RESP = h(
    "00000007  00000000 00000001 0000 0002 2f64 00000001 0001 74"
    "  00000001 00000000 0000000000000064 0000000000000000 00"
)
# v4 response, header v1 (correlation 7, tags): throttle 0, error 0, results compact [{error 0, "/d", topics
# [{"t", [{0, 100, 0, false, tags}], tags}], total 4096, usable 2048, tags}], tags.
LOG_DIRS_V4_RESP = h(
    "00000007 00  00000000 0000 02 0000 03 2f64 02 02 74"
    "  02 00000000 0000000000000064 0000000000000000 00 00 00"
    "  0000000000001000 0000000000000800 00 00"
)
LOG_DIR_PARTITION = {"partition_index": 0, "partition_size": 100, "offset_lag": 0, "is_future_key": False}


def test_describe_log_dirs_requests() -> None:
    assert plain(_request(LOG_DIRS_V1_REQ)) == {"topics": [{"topic": "t", "partitions": [0, 1]}]}
    assert _request(LOG_DIRS_V1_ALL_REQ).topics is None
    assert _request(LOG_DIRS_V2_ALL_REQ).topics is None
    assert (
        encode_request(ApiKey.DESCRIBE_LOG_DIRS, 1, 1, "c", {"topics": [{"topic": "t", "partitions": [0, 1]}]})
        == LOG_DIRS_V1_REQ
    )
    assert encode_request(ApiKey.DESCRIBE_LOG_DIRS, 2, 1, "c", {"topics": None}) == LOG_DIRS_V2_ALL_REQ


def test_describe_log_dirs_responses() -> None:
    result = {"error_code": 0, "log_dir": "/d", "topics": [{"name": "t", "partitions": [LOG_DIR_PARTITION]}]}
    v1 = decode_response(ApiKey.DESCRIBE_LOG_DIRS, 1, LOG_DIRS_V1_RESP)
    assert plain(v1) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results": [{**result, "total_bytes": -1, "usable_bytes": -1}],
    }
    v4 = decode_response(ApiKey.DESCRIBE_LOG_DIRS, 4, LOG_DIRS_V4_RESP)
    v4_result = {**result, "total_bytes": 4096, "usable_bytes": 2048}
    v4_body = {"throttle_time_ms": 0, "error_code": 0, "results": [v4_result]}
    assert plain(v4) == v4_body
    assert _response_bytes(ApiKey.DESCRIBE_LOG_DIRS, 4, v4_body) == LOG_DIRS_V4_RESP
    assert _response_bytes(ApiKey.DESCRIBE_LOG_DIRS, 1, v4_body) == LOG_DIRS_V1_RESP


# ------------------------------------------------------------------------------------------------ ACLs
# DescribeAcls v1 request (classic): resource type TOPIC (2), name null, pattern ANY (1), principal null, host
# null, operation ANY (1), permission ANY (1).
DESCRIBE_ACLS_V1_REQ = h("001d 0001 00000001 0001 63  02 ffff 01 ffff ffff 01 01")
# DescribeAcls v2 response (flexible): throttle 0, error 54, message "m", resources [], tags.
DESCRIBE_ACLS_V2_RESP = h("00000007 00  00000000 0036 02 6d 01 00")
# CreateAcls v3 request (flexible): creations [{USER (7), "u", LITERAL (3), "User:a", "*", READ (3), ALLOW (3),
# tags}], tags.
CREATE_ACLS_V3_REQ = h("001e 0003 00000001 0001 63 00  02 07 02 75 03 07 557365723a61 02 2a 03 03 00 00")
# CreateAcls v1 response (classic): throttle 0, results [{54, "x"}, {54, "x"}].
CREATE_ACLS_V1_RESP = h("00000007  00000000 00000002 0036 0001 78 0036 0001 78")
# DeleteAcls v1 request (classic): filters [{ANY (1), null, ANY, null, null, ANY, ANY}].
DELETE_ACLS_V1_REQ = h("001f 0001 00000001 0001 63  00000001 01 ffff 01 ffff ffff 01 01")
# DeleteAcls v2 response (flexible): throttle 0, filter_results [{54, "m", matching_acls [{0, null, TOPIC, "t",
# LITERAL, "p", "*", WRITE (4), ALLOW (3), tags}], tags}], tags.
DELETE_ACLS_V2_RESP = h("00000007 00  00000000 02 0036 02 6d 02 0000 00 02 02 74 03 02 70 02 2a 04 03 00 00 00")


def test_acl_requests() -> None:
    assert plain(_request(DESCRIBE_ACLS_V1_REQ)) == {
        "resource_type_filter": 2,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    creation = {
        "resource_type": 7,
        "resource_name": "u",
        "resource_pattern_type": 3,
        "principal": "User:a",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    assert plain(_request(CREATE_ACLS_V3_REQ)) == {"creations": [creation]}
    assert encode_request(ApiKey.CREATE_ACLS, 3, 1, "c", {"creations": [creation]}) == CREATE_ACLS_V3_REQ
    deleted = plain(_request(DELETE_ACLS_V1_REQ))
    assert deleted == {
        "filters": [
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            }
        ]
    }
    assert encode_request(ApiKey.DELETE_ACLS, 1, 1, "c", deleted) == DELETE_ACLS_V1_REQ


def test_acl_responses() -> None:
    described = {"throttle_time_ms": 0, "error_code": 54, "error_message": "m", "resources": []}
    assert plain(decode_response(ApiKey.DESCRIBE_ACLS, 2, DESCRIBE_ACLS_V2_RESP)) == described
    assert _response_bytes(ApiKey.DESCRIBE_ACLS, 2, described) == DESCRIBE_ACLS_V2_RESP
    created = {"throttle_time_ms": 0, "results": [{"error_code": 54, "error_message": "x"}] * 2}
    assert plain(decode_response(ApiKey.CREATE_ACLS, 1, CREATE_ACLS_V1_RESP)) == created
    assert _response_bytes(ApiKey.CREATE_ACLS, 1, created) == CREATE_ACLS_V1_RESP
    acl = {
        "error_code": 0,
        "error_message": None,
        "resource_type": 2,
        "resource_name": "t",
        "pattern_type": 3,
        "principal": "p",
        "host": "*",
        "operation": 4,
        "permission_type": 3,
    }
    deleted = {
        "throttle_time_ms": 0,
        "filter_results": [{"error_code": 54, "error_message": "m", "matching_acls": [acl]}],
    }
    assert plain(decode_response(ApiKey.DELETE_ACLS, 2, DELETE_ACLS_V2_RESP)) == deleted
    assert _response_bytes(ApiKey.DELETE_ACLS, 2, deleted) == DELETE_ACLS_V2_RESP


# ------------------------------------------------------------------------------------------------ ElectLeaders
# v0 request (classic): topic_partitions [{"t", [0]}], timeout 60000 -- no election type before v1.
ELECT_V0_REQ = h("002b 0000 00000001 0001 63  00000001 0001 74 00000001 00000000 0000ea60")
# v2 request (flexible): election type UNCLEAN (1), topic_partitions null, timeout 60000, tags.
ELECT_V2_REQ = h("002b 0002 00000001 0001 63 00  01 00 0000ea60 00")
# v0 response (classic): throttle 0, results [{"t", [{0, 84, "m"}]}] -- no top-level error before v1.
ELECT_V0_RESP = h("00000007  00000000 00000001 0001 74 00000001 00000000 0054 0001 6d")
# v1 response (classic): throttle 0, error 0, the same results.
ELECT_V1_RESP = h("00000007  00000000 0000 00000001 0001 74 00000001 00000000 0054 0001 6d")
# v2 response (flexible): throttle 0, error 0, results [{"t", [], tags}], tags.
ELECT_V2_RESP = h("00000007 00  00000000 0000 02 02 74 01 00 00")


def test_elect_leaders_requests() -> None:
    v0 = _request(ELECT_V0_REQ)
    assert plain(v0) == {
        "election_type": 0,
        "topic_partitions": [{"topic": "t", "partitions": [0]}],
        "timeout_ms": 60000,
    }
    assert encode_request(ApiKey.ELECT_LEADERS, 0, 1, "c", plain(v0)) == ELECT_V0_REQ
    v2 = _request(ELECT_V2_REQ)
    assert (v2.election_type, v2.topic_partitions, v2.timeout_ms) == (1, None, 60000)
    assert encode_request(ApiKey.ELECT_LEADERS, 2, 1, "c", plain(v2)) == ELECT_V2_REQ


def test_elect_leaders_responses() -> None:
    results = [{"topic": "t", "partition_result": [{"partition_id": 0, "error_code": 84, "error_message": "m"}]}]
    body = {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}
    assert plain(decode_response(ApiKey.ELECT_LEADERS, 0, ELECT_V0_RESP)) == body
    assert plain(decode_response(ApiKey.ELECT_LEADERS, 1, ELECT_V1_RESP)) == body
    assert _response_bytes(ApiKey.ELECT_LEADERS, 0, body) == ELECT_V0_RESP
    assert _response_bytes(ApiKey.ELECT_LEADERS, 1, body) == ELECT_V1_RESP
    every_topic = [{"topic": "t", "partition_result": []}]
    every = {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": every_topic}
    assert plain(decode_response(ApiKey.ELECT_LEADERS, 2, ELECT_V2_RESP)) == every
    assert _response_bytes(ApiKey.ELECT_LEADERS, 2, every) == ELECT_V2_RESP


# ------------------------------------------------------------------------------------------------ reassignments
# ListPartitionReassignments v0 request (flexible), header v2: timeout 60000, topics [{"t", [0], tags}], tags.
LIST_REASSIGN_REQ = h("002e 0000 00000001 0001 63 00  0000ea60 02 02 74 02 00000000 00 00")
# The same with topics null.
LIST_REASSIGN_ALL_REQ = h("002e 0000 00000001 0001 63 00  0000ea60 00 00")
# ListPartitionReassignments v0 response: throttle 0, error 0, message null, topics [{"t", partitions [{0,
# replicas [1], adding [], removing [], tags}], tags}], tags.
LIST_REASSIGN_RESP = h("00000007 00  00000000 0000 00 02 02 74 02 00000000 02 00000001 01 01 00 00 00")
# AlterPartitionReassignments v0 request: timeout 60000, topics [{"t", partitions [{0, replicas [1], tags},
# {1, replicas null (cancel), tags}], tags}], tags.
ALTER_REASSIGN_REQ = h(
    "002d 0000 00000001 0001 63 00  0000ea60 02 02 74 03 00000000 02 00000001 00  00000001 00 00 00 00"
)
# AlterPartitionReassignments v0 response: throttle 0, error 0, message null, responses [{"t", partitions
# [{0, error 39, "m", tags}], tags}], tags.
ALTER_REASSIGN_RESP = h("00000007 00  00000000 0000 00 02 02 74 02 00000000 0027 02 6d 00 00 00")


def test_partition_reassignment_requests() -> None:
    listed = _request(LIST_REASSIGN_REQ)
    assert plain(listed) == {"timeout_ms": 60000, "topics": [{"name": "t", "partition_indexes": [0]}]}
    assert _request(LIST_REASSIGN_ALL_REQ).topics is None
    assert (
        encode_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 1, "c", {"timeout_ms": 60000}) == LIST_REASSIGN_ALL_REQ
    )  # topics defaults to null
    altered = plain(_request(ALTER_REASSIGN_REQ))
    assert altered == {
        "timeout_ms": 60000,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": None}],
            }
        ],
    }
    assert encode_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, "c", altered) == ALTER_REASSIGN_REQ


def test_partition_reassignment_responses() -> None:
    ongoing = {"partition_index": 0, "replicas": [1], "adding_replicas": [], "removing_replicas": []}
    listed = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "topics": [{"name": "t", "partitions": [ongoing]}],
    }
    assert plain(decode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, LIST_REASSIGN_RESP)) == listed
    assert _response_bytes(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listed) == LIST_REASSIGN_RESP
    altered = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 39, "error_message": "m"}]}],
    }
    assert plain(decode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, ALTER_REASSIGN_RESP)) == altered
    assert _response_bytes(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, altered) == ALTER_REASSIGN_RESP


# ------------------------------------------------------------------------------------------------ client quotas
# DescribeClientQuotas v0 request (classic): components [{"user", EXACT (0), "a"}], strict true.
QUOTAS_V0_REQ = h("0030 0000 00000001 0001 63  00000001 0004 75736572 00 0001 61 01")
# v1 request (flexible): components [{"client-id", SPECIFIED (2), null, tags}], strict false, tags.
QUOTAS_V1_REQ = h("0030 0001 00000001 0001 63 00  02 0a 636c69656e742d6964 02 00 00 00 00")
# v0 response (classic): throttle 0, error 35, message "m", entries null.
QUOTAS_V0_RESP = h("00000007  00000000 0023 0001 6d ffffffff")
# v1 response (flexible): throttle 0, error 0, message "" (compact length 0 + 1), entries [{entity [{"user",
# null, tags}], values [{"k", 1.5, tags}], tags}], tags.
QUOTAS_V1_RESP = h("00000007 00  00000000 0000 01 02 02 05 75736572 00 00 02 02 6b 3ff8000000000000 00 00 00")


def test_describe_client_quotas_requests() -> None:
    v0 = plain(_request(QUOTAS_V0_REQ))
    assert v0 == {"components": [{"entity_type": "user", "match_type": 0, "match": "a"}], "strict": True}
    assert encode_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, "c", v0) == QUOTAS_V0_REQ
    v1 = plain(_request(QUOTAS_V1_REQ))
    assert v1 == {"components": [{"entity_type": "client-id", "match_type": 2, "match": None}], "strict": False}
    assert encode_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, 1, "c", v1) == QUOTAS_V1_REQ


def test_describe_client_quotas_responses() -> None:
    failed = {"throttle_time_ms": 0, "error_code": 35, "error_message": "m", "entries": None}
    assert plain(decode_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, QUOTAS_V0_RESP)) == failed
    assert _response_bytes(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, failed) == QUOTAS_V0_RESP
    entry = {"entity": [{"entity_type": "user", "entity_name": None}], "values": [{"key": "k", "value": 1.5}]}
    found = {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "entries": [entry]}
    assert plain(decode_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, QUOTAS_V1_RESP)) == found
    assert _response_bytes(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, found) == QUOTAS_V1_RESP
