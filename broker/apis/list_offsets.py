"""ListOffsets (2): earliest (-2), latest (-1; the LSO under read_committed), max timestamp (-3) and by timestamp.

Leader epochs (v4+, KIP-320), as Kafka's Partition.fetchOffsetForTimestamp: the request's current_leader_epoch is
checked first (``ReplicaManager.check_leader_epoch``: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); the answer's
leader_epoch is the partition's current epoch for latest, the first cached epoch for earliest when it starts at or
before the log start offset, else the epoch of the leader that appended the offset found (-1 when unknown).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import trio
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
#: Partitions looked up between two checkpoints, so a request naming many does not hold the event loop.
PARTITIONS_PER_CHECKPOINT = 256


def _lookup(broker: Broker, name: str, index: int, timestamp: int, isolation: int, current_leader_epoch: int) -> dict:
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
        return entry
    if not broker.replicas.leads(name, index):
        entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return entry
    entry["error_code"] = broker.replicas.check_leader_epoch(name, index, current_leader_epoch)
    if entry["error_code"] != ErrorCode.NONE:
        return entry
    epochs = partition_log.leader_epoch_cache
    if timestamp == EARLIEST_TIMESTAMP:
        entry["offset"] = partition_log.log_start_offset
        earliest = epochs.earliest
        if earliest is not None and earliest.start_offset <= partition_log.log_start_offset:
            entry["leader_epoch"] = earliest.epoch
    elif timestamp == LATEST_TIMESTAMP:
        if isolation == READ_COMMITTED:
            entry["offset"] = ReplicaManager.last_stable_offset(partition_log)
        else:
            entry["offset"] = partition_log.high_watermark
        entry["leader_epoch"] = broker.replicas.leader_epoch(name, index)
    elif timestamp == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset()
        if found is not None:
            entry["offset"], entry["timestamp"] = found
            entry["leader_epoch"] = epochs.epoch_for_offset(entry["offset"])
    elif timestamp < 0:
        entry["error_code"] = ErrorCode.INVALID_REQUEST
    else:
        found = partition_log.offset_for_timestamp(timestamp)
        if found is not None and found[0] < partition_log.high_watermark:
            entry["offset"], entry["timestamp"] = found
            entry["leader_epoch"] = epochs.epoch_for_offset(entry["offset"])
    return entry


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    listed = Counter((topic.name, p.partition_index) for topic in body.topics for p in topic.partitions)
    topics = []
    looked_up = 0
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            if listed[(topic.name, p.partition_index)] > 1:
                # Kafka answers every listing of a partition named more than once with INVALID_REQUEST
                # (ListOffsetsRequest.duplicatePartitions), without looking it up.
                partitions.append(_duplicate_entry(p.partition_index))
                continue
            looked_up += 1
            if looked_up % PARTITIONS_PER_CHECKPOINT == 0:
                await trio.lowlevel.checkpoint()
            partitions.append(
                _lookup(
                    broker, topic.name, p.partition_index, p.timestamp, body.isolation_level, p.current_leader_epoch
                )
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _duplicate_entry(index: int) -> dict:
    return {
        "partition_index": index,
        "error_code": ErrorCode.INVALID_REQUEST,
        "timestamp": UNKNOWN,
        "offset": UNKNOWN,
        "leader_epoch": UNKNOWN,
        "old_style_offsets": [],
    }
