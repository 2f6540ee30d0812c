"""KIP-848 messages on the wire: ConsumerGroupHeartbeat's nullable Assignment struct (int8 -1 for null, 1 then the
struct), byte for byte as Kafka's generated code writes it, compiled and interpreted alike."""

from __future__ import annotations

import uuid

import pytest
from oncelog.protocol.api import SCHEMAS, SUPPORTED_VERSIONS, ApiKey

TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-000000000007")
RESPONSE = SCHEMAS[ApiKey.CONSUMER_GROUP_HEARTBEAT][1]


def _body(assignment) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m",
        "member_epoch": 3,
        "heartbeat_interval_ms": 5000,
        "assignment": assignment,
    }


# throttle, error, null message (0), member id "m" (compact: 2, "m"), epoch, interval.
HEAD = bytes.fromhex("00000000000000026d0000000300001388")


@pytest.mark.parametrize("compiled", [True, False])
def test_null_assignment_is_minus_one(compiled: bool) -> None:
    construct = RESPONSE.construct(1, compiled=compiled)
    data = construct.build(_body(None))
    assert data == HEAD + b"\xff" + b"\x00"
    assert construct.parse(data).assignment is None


@pytest.mark.parametrize("compiled", [True, False])
def test_present_assignment_is_one_then_the_struct(compiled: bool) -> None:
    construct = RESPONSE.construct(1, compiled=compiled)
    body = _body({"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]})
    data = construct.build(body)
    # 1, topics (compact 1 entry: 2), uuid, partitions (compact 2 entries: 3) 0 and 2, tags, struct tags, top tags.
    partitions = bytes.fromhex("030000000000000002")
    assert data == HEAD + b"\x01" + b"\x02" + TOPIC_ID.bytes + partitions + b"\x00" + b"\x00" + b"\x00"
    parsed = construct.parse(data).assignment
    assert parsed.topic_partitions[0].topic_id == TOPIC_ID and parsed.topic_partitions[0].partitions == [0, 2]


def test_advertised_ranges() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    assert SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 0)
