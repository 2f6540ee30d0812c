"""OffsetForLeaderEpoch (23): where a leader epoch ended in this broker's log (KIP-101 for followers, KIP-320 for
consumers validating their position after a leader change), as Kafka's ReplicaManager.lastOffsetForLeaderEpoch
answers.

Per partition, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist;
NOT_LEADER_OR_FOLLOWER when its log is not on this broker; FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the
request's current_leader_epoch (v2+; -1 is not checked) is older / newer than the partition's; else the log's
leader-epoch cache answers (``LeaderEpochCache.end_offset_for``): the largest epoch at or below the one asked for and
the offset where it ended (the log end offset for the latest epoch); for an epoch older than every cached one, that
epoch and the first cached epoch's start offset; -1 / -1 for an epoch newer than the latest or when none is known.
Each listing of a partition is answered. ``replica_id`` (v3+: a follower's broker id, -1 from consumers, -2 by
default) does not change the answer, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Partitions looked up between two checkpoints, so a request naming many does not hold the event loop.
PARTITIONS_PER_CHECKPOINT = 256


async def handle(broker: Broker, request: Request) -> dict:
    topics = []
    looked_up = 0
    for topic in request.body.topics:
        info = broker.metadata.get(topic.topic)
        partitions = []
        for p in topic.partitions:
            looked_up += 1
            if looked_up % PARTITIONS_PER_CHECKPOINT == 0:
                await trio.lowlevel.checkpoint()
            if info is None or not 0 <= p.partition < info.partitions:
                error, epoch, end_offset = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            else:
                error, (epoch, end_offset) = broker.replicas.last_offset_for_leader_epoch(
                    topic.topic, p.partition, p.current_leader_epoch, p.leader_epoch
                )
            partitions.append(
                {"error_code": error, "partition": p.partition, "leader_epoch": epoch, "end_offset": end_offset}
            )
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
