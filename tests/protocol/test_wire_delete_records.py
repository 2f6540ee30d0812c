"""DeleteRecords v0-2: golden bytes written by hand from Kafka's DeleteRecordsRequest/Response.json (flexible from
v2), decoded and re-encoded."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    ApiKey,
    RequestHeader,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import decode_frame, plain
from support.wire_samples import from_hex as h

# v0 and v1 (classic), header v1 with client_id "c": topics [{"t", partitions [{0, offset 5}, {1, offset -1}]}],
# timeout 30000.
CLASSIC_REQ_BODY = h("00000001 0001 74 00000002 00000000 0000000000000005 00000001 ffffffffffffffff  00007530")
# v2 (flexible), header v2 (empty tags): topics compact [{"t", partitions compact [{0, offset 5, tags}], tags}],
# timeout 30000, tags.
V2_REQ = h("0015 0002 00000001 0001 63 00  02 02 74 02 00000000 0000000000000005 00 00  00007530 00")
# v0 and v1 response, header v0 (correlation 7): throttle 0, topics [{"t", partitions [{0, low watermark 5,
# error 0}]}].
CLASSIC_RESP = h("00000007  00000000 00000001 0001 74 00000001 00000000 0000000000000005 0000")
# v2 response, header v1 (correlation 7, tags): throttle 0, topics compact [{"t", partitions compact [{1, low
# watermark -1, error 1 (OFFSET_OUT_OF_RANGE), tags}], tags}], tags.
V2_RESP = h("00000007 00  00000000 02 02 74 02 00000001 ffffffffffffffff 0001 00 00 00")


@pytest.mark.parametrize("version", [0, 1])
def test_classic_request(version: int) -> None:
    frame = h(f"0015 000{version} 00000001 0001 63") + CLASSIC_REQ_BODY
    body = decode_frame(frame)
    assert plain(body) == {
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 5},
                                                {"partition_index": 1, "offset": -1}]}],
        "timeout_ms": 30000,
    }  # fmt: skip
    assert encode_request(ApiKey.DELETE_RECORDS, version, 1, "c", plain(body)) == frame


def test_flexible_v2_request() -> None:
    body = decode_frame(V2_REQ)
    assert plain(body) == {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 5}]}],
                           "timeout_ms": 30000}  # fmt: skip
    assert encode_request(ApiKey.DELETE_RECORDS, 2, 1, "c", plain(body)) == V2_REQ


def _header(version: int) -> RequestHeader:
    return decode_request_header(encode_request(ApiKey.DELETE_RECORDS, version, 7, None, {}))


@pytest.mark.parametrize("version", [0, 1])
def test_classic_response(version: int) -> None:
    response = decode_response(ApiKey.DELETE_RECORDS, version, CLASSIC_RESP)
    partitions = [{"partition_index": 0, "low_watermark": 5, "error_code": 0}]
    assert plain(response) == {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": partitions}]}
    assert encode_response(_header(version), plain(response)) == CLASSIC_RESP


def test_flexible_v2_response() -> None:
    response = decode_response(ApiKey.DELETE_RECORDS, 2, V2_RESP)
    partitions = [{"partition_index": 1, "low_watermark": -1, "error_code": 1}]
    assert plain(response) == {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": partitions}]}
    assert encode_response(_header(2), plain(response)) == V2_RESP
