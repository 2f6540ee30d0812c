"""ElectLeaders (43): this node leads every partition and is its only (so preferred) replica, so no election is ever
needed. Answers as Kafka's controller (ReplicationControlManager.electLeaders):

- a named partition that exists: ELECTION_NOT_NEEDED, for a preferred election (the leader is the preferred
  replica) and an unclean one (the partition has a leader) alike;
- a named topic or partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION ("No such topic as T" /
  "No such partition as T-P");
- ``topic_partitions`` null (every partition): every topic, each with no partition results, since Kafka leaves out
  the partitions whose election was not needed;
- an election type other than 0 and 1: INVALID_REQUEST at the top (v1+) and for every named partition;
- an empty (not null) ``topic_partitions``: nothing, whatever the election type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.messages.elect_leaders import ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's Errors.ELECTION_NOT_NEEDED message, which ApiError gives when no message is set.
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def _partition_result(broker: Broker, topic: str, partition: int) -> dict:
    if broker.metadata.get(topic) is None:
        error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif not broker.metadata.has_partition(topic, partition):
        error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    else:
        error, message = ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE
    return {"partition_id": partition, "error_code": error, "error_message": message}


def _every_partition_failed(topic_partitions, error: int, message: str) -> list[dict]:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error for each named partition."""
    return [
        {
            "topic": t.topic,
            "partition_result": [
                {"partition_id": p, "error_code": error, "error_message": message} for p in t.partitions
            ],
        }
        for t in topic_partitions or []
    ]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if body.topic_partitions == []:
        # Kafka's QuorumController answers an empty (not null) list before looking at the election type.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": []}
    if body.election_type not in (ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN):
        message = f"Unknown election type {body.election_type}"
        results = _every_partition_failed(body.topic_partitions, ErrorCode.INVALID_REQUEST, message)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": results}
    if body.topic_partitions is None:
        results = [{"topic": name, "partition_result": []} for name in sorted(broker.metadata.topics)]
    else:
        results = [
            {"topic": t.topic, "partition_result": [_partition_result(broker, t.topic, p) for p in t.partitions]}
            for t in body.topic_partitions
        ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}
