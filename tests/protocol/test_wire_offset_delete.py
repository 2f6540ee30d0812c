"""OffsetDelete v0 and the consumer protocol's subscription: golden bytes written by hand from Kafka's layouts
(OffsetDeleteRequest.json / OffsetDeleteResponse.json, ConsumerProtocolSubscription.json)."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    DECLARED_VERSIONS,
    SUPPORTED_VERSIONS,
    ApiKey,
    DecodeError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from oncelog.protocol.consumer_protocol import decode_subscription, encode_subscription
from support.wire_samples import from_hex as h
from support.wire_samples import plain

# OffsetDelete v0 request, header v1 (client_id "c"): group_id "g1", topics [{"t", partitions [0, 3]}].
OFFSET_DELETE_V0_REQ = h("002f 0000 00000001 0001 63  0002 6731  00000001 0001 74 00000002 00000000 00000003")
# OffsetDelete v0 response, header v0 (correlation 7): error 0, throttle 0, topics [{"t", [{0, error 0},
# {3, error 86 GROUP_SUBSCRIBED_TO_TOPIC}]}].
OFFSET_DELETE_V0_RESP = h("00000007  0000 00000000  00000001 0001 74 00000002 00000000 0000 00000003 0056")
# A group-level error: GROUP_ID_NOT_FOUND (69), throttle 0, no topics.
OFFSET_DELETE_V0_ERROR_RESP = h("00000007  0045 00000000 00000000")
# ConsumerProtocolSubscription v0: version 0, topics ["t", "ab"], user data null.
SUBSCRIPTION_V0 = h("0000 00000002 0001 74 0002 6162 ffffffff")
# v1 appends owned partitions: [{"t", [2]}].
SUBSCRIPTION_V1 = h("0001 00000001 0001 74 00000001 0102  00000001 0001 74 00000001 00000002")


def test_declared_and_advertised_version_is_zero_and_not_flexible() -> None:
    assert DECLARED_VERSIONS[ApiKey.OFFSET_DELETE] == SUPPORTED_VERSIONS[ApiKey.OFFSET_DELETE] == (0, 0)
    assert request_header_version(ApiKey.OFFSET_DELETE, 0) == 1
    assert response_header_version(ApiKey.OFFSET_DELETE, 0) == 0
    v1 = OFFSET_DELETE_V0_REQ[:2] + b"\x00\x01" + OFFSET_DELETE_V0_REQ[4:]
    with pytest.raises(UnsupportedVersionError):
        decode_request_header(v1, DECLARED_VERSIONS)


def test_request_v0() -> None:
    header = decode_request_header(OFFSET_DELETE_V0_REQ)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (47, 0, 1, "c")
    body = decode_request(header, OFFSET_DELETE_V0_REQ)
    expected = {
        "group_id": "g1",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 3}]}],
    }
    assert plain(body) == expected
    assert encode_request(ApiKey.OFFSET_DELETE, 0, 1, "c", expected) == OFFSET_DELETE_V0_REQ


def test_response_v0() -> None:
    body = {
        "error_code": 0,
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 3, "error_code": 86}],
            }
        ],
    }
    header = RequestHeader(ApiKey.OFFSET_DELETE, 0, 7, "c", 0)
    assert encode_response(header, body) == OFFSET_DELETE_V0_RESP
    assert plain(decode_response(ApiKey.OFFSET_DELETE, 0, OFFSET_DELETE_V0_RESP)) == body
    error = decode_response(ApiKey.OFFSET_DELETE, 0, OFFSET_DELETE_V0_ERROR_RESP)
    assert (error.error_code, error.throttle_time_ms, list(error.topics)) == (69, 0, [])


def test_subscription_encoding() -> None:
    assert encode_subscription(["t", "ab"]) == SUBSCRIPTION_V0
    assert decode_subscription(SUBSCRIPTION_V0) == ["t", "ab"]
    # Later versions only append fields: their version 0 prefix gives the topics.
    assert decode_subscription(SUBSCRIPTION_V1) == ["t"]


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", h("ffff 00000000 ffffffff"), h("0000 00000002 0001 74"), h("0000 00000001 0005 74")],
    ids=["empty", "short-version", "negative-version", "missing-topic", "truncated-string"],
)
def test_malformed_subscription_raises(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_subscription(data)
