"""OffsetDelete (47, KIP-496): delete a group's committed offsets; answered once the tombstones are fsynced.

As Kafka's KafkaApis.handleOffsetDeleteRequest: partitions of unknown topics, or beyond a topic's partition count,
are answered UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator; a group-level error (INVALID_GROUP_ID,
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or a failed append) replaces every partition's answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.apis.offset_commit import by_topic
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    errors: dict[tuple[str, int], int] = {}
    known: list[tuple[str, int]] = []
    for topic in body.topics:
        for partition in topic.partitions:
            tp = (topic.name, partition.partition_index)
            if broker.metadata.has_partition(*tp):
                known.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error, deleted = await broker.groups.delete_offsets(body.group_id, known)
    if error != ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    errors.update(deleted)
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": by_topic(errors)}
