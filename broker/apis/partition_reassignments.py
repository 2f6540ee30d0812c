"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455, on a single node: every partition
has this node as its only replica, no other broker is registered, so no reassignment can ever start. Answers as
Kafka's controller (ReplicationControlManager):

- List: no reassignment in progress, whatever is asked: no topics, NONE.
- Alter, per partition, checked in Kafka's order: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION;
  ``replicas`` null (cancel) is NO_REASSIGNMENT_IN_PROGRESS; an empty replica list, a broker id other than this
  node's, or one given twice is INVALID_REPLICA_ASSIGNMENT (ids checked in ascending order, as Kafka's
  validateManualPartitionAssignment); ``[this node]``, the current replica set, changes nothing: NONE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's Errors.NO_REASSIGNMENT_IN_PROGRESS message, which its exception carries.
NO_REASSIGNMENT_MESSAGE = "No partition reassignment is in progress."


def _invalid_assignment(replicas: list[int], node_id: int) -> str | None:
    """Why ``replicas`` is not a valid assignment when ``node_id`` is the only registered broker, or None."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node_id:
            return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
        if broker_id == previous:
            return f"The manual partition assignment includes the broker {broker_id} more than once."
        previous = broker_id
    return None


def _reassign(broker: Broker, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, str | None]:
    if broker.metadata.get(topic) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not broker.metadata.has_partition(topic, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE
    problem = _invalid_assignment(list(replicas), broker.node_id)
    if problem is not None:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    return ErrorCode.NONE, None


async def handle_alter(broker: Broker, request: Request) -> dict:
    topics = request.body.topics
    responses = []
    for topic in topics:
        partitions = []
        for p in topic.partitions:
            error, message = _reassign(broker, topic.name, p.partition_index, p.replicas)
            partitions.append({"partition_index": p.partition_index, "error_code": error, "error_message": message})
        responses.append({"name": topic.name, "partitions": partitions})
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        # Kafka's controller answers an empty request with the schema's Java default, "", and sets null otherwise.
        "error_message": None if topics else "",
        "responses": responses,
    }


async def handle_list(broker: Broker, request: Request) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": []}
