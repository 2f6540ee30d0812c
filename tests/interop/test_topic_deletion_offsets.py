"""Interop: deleting a topic removes every group's committed offsets of it (Kafka's onPartitionsDeleted), seen
through confluent-kafka: a topic created again under the same name has no committed offsets."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import OFFSET_INVALID, TopicPartition
from confluent_kafka.admin import AdminClient
from support.topics import create_topic_confluent
from test_offset_delete import DEADLINE_S, _commit, _listed

COMMITTED = 7


def test_recreated_topic_has_no_offsets_of_the_deleted_one(bootstrap: str, make_topic: Callable[..., str]) -> None:
    from conftest import unique_topic

    topic = make_topic("deltopic", 2)
    groups = [unique_topic("deltopic-group"), unique_topic("deltopic-group")]
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    for group in groups:
        _commit(bootstrap, group, dict.fromkeys(partitions, COMMITTED))
        assert _listed(bootstrap, group, partitions) == {0: COMMITTED, 1: COMMITTED}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(DEADLINE_S)
    create_topic_confluent(bootstrap, topic, 2)
    for group in groups:
        assert _listed(bootstrap, group, partitions) == {0: OFFSET_INVALID, 1: OFFSET_INVALID}
