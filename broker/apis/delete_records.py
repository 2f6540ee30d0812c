"""DeleteRecords (21): raise partitions' log start offsets, as Kafka's KafkaApis.handleDeleteRecordsRequest and
ReplicaManager.deleteRecords do on the leader.

Per partition, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION when the topic or partition does not exist,
INVALID_TOPIC_EXCEPTION for an internal topic, then ``ReplicaManager.delete_records``. A partition named twice is
answered once, with its last offset (Kafka keys them by partition). The answer comes once every new log start
offset is durable; ``timeout_ms`` bounds only the wait for the housekeeping lock before deleting the segments wholly
below them (Kafka's wait is for follower replicas, which a single node does not have).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.replica_manager import PartitionDeletion
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    results: dict[tuple[str, int], PartitionDeletion] = {}
    offsets: dict[tuple[str, int], int] = {}
    for topic in body.topics:
        info = broker.metadata.get(topic.name)
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if info is None or not 0 <= partition.partition_index < info.partitions:
                results[key] = PartitionDeletion(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif info.is_internal:
                results[key] = PartitionDeletion(ErrorCode.INVALID_TOPIC_EXCEPTION)
            else:
                offsets[key] = partition.offset
    results |= broker.replicas.delete_records(offsets)
    deleted = [
        partition_log
        for key, result in results.items()
        if result.error == ErrorCode.NONE and (partition_log := broker.replicas.get_log(*key)) is not None
    ]
    await broker.delete_segments_below_start(deleted, body.timeout_ms / 1000)

    topics: dict[str, list[dict]] = {}
    for name, index in dict.fromkeys((t.name, p.partition_index) for t in body.topics for p in t.partitions):
        result = results[(name, index)]
        topics.setdefault(name, []).append(
            {"partition_index": index, "low_watermark": result.low_watermark, "error_code": result.error}
        )
    return {"throttle_time_ms": 0, "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
