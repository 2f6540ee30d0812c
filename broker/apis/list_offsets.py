"""ListOffsets (2): earliest (-2), latest (-1; the LSO under read_committed), max timestamp (-3) and by timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.replica_manager import READ_COMMITTED, ReplicaManager
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's ListOffsetsRequest sentinels.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
UNKNOWN = -1


def _lookup(broker: Broker, name: str, index: int, timestamp: int, isolation: int) -> dict:
    entry = {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "timestamp": UNKNOWN,
        "offset": UNKNOWN,
        "leader_epoch": UNKNOWN,
        "old_style_offsets": [],
    }
    topic = broker.metadata.get(name)
    partition_log = broker.replicas.get_log(name, index) if topic is not None else None
    if partition_log is None:
        entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif timestamp == EARLIEST_TIMESTAMP:
        entry["offset"] = partition_log.log_start_offset
    elif timestamp == LATEST_TIMESTAMP:
        if isolation == READ_COMMITTED:
            entry["offset"] = ReplicaManager.last_stable_offset(partition_log)
        else:
            entry["offset"] = partition_log.high_watermark
    elif timestamp == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset()
        if found is not None:
            entry["offset"], entry["timestamp"] = found
    elif timestamp < 0:
        entry["error_code"] = ErrorCode.INVALID_REQUEST
    else:
        found = partition_log.offset_for_timestamp(timestamp)
        if found is not None and found[0] < partition_log.high_watermark:
            entry["offset"], entry["timestamp"] = found
    return entry


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    _lookup(broker, topic.name, p.partition_index, p.timestamp, body.isolation_level)
                    for p in topic.partitions
                ],
            }
            for topic in body.topics
        ],
    }
