"""Requests decoded in place from a memoryview: records fields are views into the frame, everything else as from
bytes."""

from __future__ import annotations

import pytest
from oncelog.protocol import ApiKey, DecodeError, decode_request, decode_request_header, encode_request
from oncelog.protocol.records import SimpleRecord, encode_batch


def _produce_frame(version: int) -> tuple[bytes, list[bytes]]:
    batches = [encode_batch([SimpleRecord(b"k%d" % i, bytes([i]) * 70_000)], base_offset=0) for i in range(2)]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": b} for i, b in enumerate(batches)]},
        ],
    }
    return encode_request(ApiKey.PRODUCE, version, 5, "client", body), batches


@pytest.mark.parametrize("version", [3, 8, 9])
def test_records_are_read_only_views_into_the_frame(version: int) -> None:
    frame, batches = _produce_frame(version)
    view = memoryview(frame)
    in_place = decode_request(decode_request_header(view), view)
    copied = decode_request(decode_request_header(frame), frame)
    assert in_place == copied
    for data, batch in zip(in_place.topic_data[0].partition_data, batches, strict=True):
        records = data.records
        assert isinstance(records, memoryview) and records.readonly and records.obj is frame
        assert records == batch
    assert all(type(d.records) is bytes for d in copied.topic_data[0].partition_data)


def test_a_records_field_past_the_frame_end_is_a_decode_error() -> None:
    frame, _ = _produce_frame(9)
    cut = memoryview(frame)[: len(frame) - 100]
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(decode_request_header(cut), cut)
