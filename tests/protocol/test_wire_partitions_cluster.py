"""CreatePartitions and DescribeCluster: golden bytes written by hand from Kafka's message layouts."""

from __future__ import annotations

from oncelog.protocol import ApiKey, decode_response, encode_request
from support.wire_samples import decode_frame as _request
from support.wire_samples import from_hex as h
from support.wire_samples import plain

# CreatePartitions v1 (classic), header v1 with client_id "c": topics [{"t", count 3, assignments [[1]]}],
# timeout 30000, validate_only true.
CREATE_PARTITIONS_V1_REQ = h(
    "0025 0001 00000001 0001 63  00000001 0001 74 00000003 00000001 00000001 00000001  00007530 01"
)
# CreatePartitions v2 (flexible), header v2 (empty tags): topics compact [{"t", count 3, assignments null,
# tags}], timeout 30000, validate_only false, tags.
CREATE_PARTITIONS_V2_REQ = h("0025 0002 00000001 0001 63 00  02 02 74 00000003 00 00  00007530 00 00")
# CreatePartitions v3 response, header v1 (correlation 7, tags): throttle 0, results compact [{"t", error 37,
# message "m", tags}], tags.
CREATE_PARTITIONS_V3_RESP = h("00000007 00  00000000 02 02 74 0025 02 6d 00 00")
# DescribeCluster v0 request, header v2: include_cluster_authorized_operations true, tags.
DESCRIBE_CLUSTER_V0_REQ = h("003c 0000 00000001 0001 63 00  01 00")
# DescribeCluster v1 request: include false, endpoint_type 2 (controllers), tags.
DESCRIBE_CLUSTER_V1_REQ = h("003c 0001 00000001 0001 63 00  00 02 00")
# DescribeCluster v1 response, header v1: throttle 0, error 0, message null, endpoint_type 1, cluster_id "ab",
# controller 1, brokers compact [{1, "h", 9092, rack null, tags}], authorized operations INT32_MIN, tags.
DESCRIBE_CLUSTER_V1_RESP = h(
    "00000007 00  00000000 0000 00 01 03 6162 00000001  02 00000001 02 68 00002384 00 00  80000000 00"
)


def test_create_partitions_requests() -> None:
    v1 = _request(CREATE_PARTITIONS_V1_REQ)
    assert plain(v1) == {
        "topics": [{"name": "t", "count": 3, "assignments": [{"broker_ids": [1]}]}],
        "timeout_ms": 30000,
        "validate_only": True,
    }
    v2 = _request(CREATE_PARTITIONS_V2_REQ)
    assert (v2.topics[0].name, v2.topics[0].count, v2.topics[0].assignments, v2.validate_only) == ("t", 3, None, False)
    assert encode_request(ApiKey.CREATE_PARTITIONS, 1, 1, "c", plain(v1)) == CREATE_PARTITIONS_V1_REQ
    assert encode_request(ApiKey.CREATE_PARTITIONS, 2, 1, "c", plain(v2)) == CREATE_PARTITIONS_V2_REQ


def test_create_partitions_v3_response() -> None:
    response = decode_response(ApiKey.CREATE_PARTITIONS, 3, CREATE_PARTITIONS_V3_RESP)
    results = [{"name": "t", "error_code": 37, "error_message": "m"}]
    assert plain(response) == {"throttle_time_ms": 0, "results": results}


def test_describe_cluster_requests() -> None:
    v0 = _request(DESCRIBE_CLUSTER_V0_REQ)
    assert (v0.include_cluster_authorized_operations, v0.endpoint_type) == (True, 1)  # v0 means brokers
    v1 = _request(DESCRIBE_CLUSTER_V1_REQ)
    assert (v1.include_cluster_authorized_operations, v1.endpoint_type) == (False, 2)
    assert encode_request(ApiKey.DESCRIBE_CLUSTER, 1, 1, "c", plain(v1)) == DESCRIBE_CLUSTER_V1_REQ


def test_describe_cluster_v1_response() -> None:
    response = decode_response(ApiKey.DESCRIBE_CLUSTER, 1, DESCRIBE_CLUSTER_V1_RESP)
    assert plain(response) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": "ab",
        "controller_id": 1,
        "brokers": [{"broker_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_authorized_operations": -(2**31),
    }
