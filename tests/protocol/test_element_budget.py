"""decode_request's element budget: array elements counted across every array of a request."""

from __future__ import annotations

import pytest
from oncelog.protocol import DecodeError, decode_request, decode_request_header, encode_request
from oncelog.protocol.codec import MAX_REQUEST_ELEMENTS


def _fetch(topics: int, partitions: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [
            {
                "topic": f"t{t}",
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1} for p in range(partitions)
                ],
            }
            for t in range(topics)
        ],
    }
    return encode_request(1, 4, 1, "c", body)


def test_nested_arrays_share_one_budget() -> None:
    frame = _fetch(10, 100)  # 10 + 1,000 elements
    header = decode_request_header(frame)
    assert len(decode_request(header, frame, max_elements=1010).topics) == 10
    with pytest.raises(DecodeError, match="budget of elements"):
        decode_request(header, frame, max_elements=1009)
    with pytest.raises(DecodeError, match="budget of elements"):
        decode_request(header, memoryview(frame), max_elements=1009)  # decoded in place: the same bound


def test_default_budget_refuses_a_dense_request_before_decoding_it() -> None:
    count = MAX_REQUEST_ELEMENTS + 1
    frame = encode_request(3, 1, 1, "c", {"topics": []})[:-4] + count.to_bytes(4, "big") + b"\x00\x00" * count
    header = decode_request_header(frame)
    with pytest.raises(DecodeError, match="budget of elements"):
        decode_request(header, frame)
    assert len(decode_request(header, frame, max_elements=None).topics) == count
