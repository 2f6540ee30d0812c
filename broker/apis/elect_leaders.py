"""ElectLeaders (43). On a cluster the elections are made (``ClusterMember.elect_leaders``: preferred, or unclean for
a partition without a leader); with ``topic_partitions`` null, every partition whose leader is not its preferred
replica is elected. On a single node, which leads every partition and is its only (so preferred) replica, no
election is ever needed. Answers as Kafka's controller (ReplicationControlManager.electLeaders):

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
    from oncelog.broker.cluster.member import ClusterMember
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
    if broker.member is not None:
        return await _elect_on_cluster(broker.member, body.topic_partitions, body.election_type)
    if body.topic_partitions is None:
        results = [{"topic": name, "partition_result": []} for name in sorted(broker.metadata.topics)]
    else:
        results = [
            {"topic": t.topic, "partition_result": [_partition_result(broker, t.topic, p) for p in t.partitions]}
            for t in body.topic_partitions
        ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}


async def _elect_on_cluster(member: ClusterMember, topic_partitions, election_type: int) -> dict:  # type: ignore[no-untyped-def]
    unclean = election_type == ELECTION_TYPE_UNCLEAN
    if topic_partitions is None:
        wanted = [
            tp
            for tp, state in member.image.topic_partitions().items()
            if (state.leader < 0 if unclean else state.leader != state.replicas[0])
        ]
    else:
        wanted = [(t.topic, p) for t in topic_partitions for p in t.partitions]
    outcomes = await member.elect_leaders(wanted, unclean=unclean)
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), refused in outcomes.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_id": partition,
                "error_code": refused.error if refused else ErrorCode.NONE,
                "error_message": str(refused) if refused else None,
            }
        )
    results = [{"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}
