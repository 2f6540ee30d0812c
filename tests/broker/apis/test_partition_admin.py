"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments through the wire, answered as Kafka's
controller answers for one broker that leads every partition (ReplicationControlManager)."""

from __future__ import annotations

import pytest
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import create_topic_body

NODE = 1  # node.id default
NOT_NEEDED = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")


def _elect_body(topics: dict[str, list[int]] | None, election_type: int = 0) -> dict:
    partitions = None if topics is None else [{"topic": t, "partitions": p} for t, p in topics.items()]
    return {"election_type": election_type, "topic_partitions": partitions, "timeout_ms": 60000}


def _elected(response) -> dict[str, list[tuple[int, int, str | None]]]:
    return {
        r.topic: [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result]
        for r in response.replica_election_results
    }


@pytest.mark.parametrize(("version", "election_type"), [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)])
async def test_existing_partitions_need_no_election(client, version: int, election_type: int) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("led", partitions=2))
    body = _elect_body({"led": [0, 1, 2], "nowhere": [0]}, election_type)
    response = await client.request(ApiKey.ELECT_LEADERS, version, body)
    assert response.error_code == ErrorCode.NONE
    assert _elected(response) == {
        "led": [
            (0, *NOT_NEEDED),
            (1, *NOT_NEEDED),
            (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as led-2"),
        ],
        "nowhere": [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nowhere")],
    }


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_every_partition_lists_every_topic_with_no_election(client, version: int) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("b-topic", partitions=3))
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("a-topic", partitions=1))
    await client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})  # creates __consumer_offsets
    response = await client.request(ApiKey.ELECT_LEADERS, version, _elect_body(None))
    assert response.error_code == ErrorCode.NONE
    assert _elected(response) == {CONSUMER_OFFSETS_TOPIC: [], "a-topic": [], "b-topic": []}


async def test_unknown_election_type_is_invalid_request(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("typed", partitions=1))
    response = await client.request(ApiKey.ELECT_LEADERS, 2, _elect_body({"typed": [0], "nowhere": [3]}, 2))
    message = "Unknown election type 2"
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert _elected(response) == {
        "typed": [(0, ErrorCode.INVALID_REQUEST, message)],
        "nowhere": [(3, ErrorCode.INVALID_REQUEST, message)],
    }
    every = await client.request(ApiKey.ELECT_LEADERS, 1, _elect_body(None, -1))
    assert (every.error_code, _elected(every)) == (ErrorCode.INVALID_REQUEST, {})
    empty = await client.request(ApiKey.ELECT_LEADERS, 1, _elect_body({}, 7))  # answered before the type is read
    assert (empty.error_code, _elected(empty)) == (ErrorCode.NONE, {})


@pytest.mark.parametrize("topics", [None, [], [{"name": "listed", "partition_indexes": [0, 1, 9]}]])
async def test_no_reassignment_is_ever_listed(client, topics) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("listed", partitions=2))
    response = await client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": topics})
    assert (response.error_code, response.error_message, list(response.topics)) == (ErrorCode.NONE, None, [])


async def _alter(client, partitions: list[tuple[str, int, list[int] | None]]):
    topics: dict[str, list[dict]] = {}
    for topic, index, replicas in partitions:
        topics.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
    body = {"timeout_ms": 1000, "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}
    return await client.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)


async def test_reassignment_answers(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("moved", partitions=2))
    response = await _alter(
        client,
        [
            ("moved", 0, [NODE]),  # the current replica set: nothing to do
            ("moved", 1, [2]),  # not a registered broker
            ("moved", 0, [3, NODE, 2]),  # checked in ascending order: 2 first
            ("moved", 1, [NODE, NODE]),
            ("moved", 0, []),
            ("moved", 1, None),  # cancel: nothing in progress
            ("moved", 2, [NODE]),
            ("gone", 0, [NODE]),
        ],
    )
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    answers = [
        (r.name, p.partition_index, p.error_code, p.error_message) for r in response.responses for p in r.partitions
    ]
    invalid = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert answers == [
        ("moved", 0, ErrorCode.NONE, None),
        ("moved", 1, invalid, "The manual partition assignment includes broker 2, but no such broker is registered."),
        ("moved", 0, invalid, "The manual partition assignment includes broker 2, but no such broker is registered."),
        ("moved", 1, invalid, f"The manual partition assignment includes the broker {NODE} more than once."),
        ("moved", 0, invalid, "The manual partition assignment includes an empty replica list."),
        ("moved", 1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
        ("moved", 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition moved:2."),
        ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named gone."),
    ]
    listed = await client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None})
    assert list(listed.topics) == []


async def test_an_empty_reassignment_request_gets_kafkas_empty_message(client) -> None:
    response = await _alter(client, [])
    assert (response.error_code, response.error_message, list(response.responses)) == (ErrorCode.NONE, "", [])
