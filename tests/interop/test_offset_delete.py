"""Interop: deleting a group's committed offsets (OffsetDelete, KIP-496) against a real broker process.

confluent-kafka 2.16 has no ``delete_consumer_group_offsets`` (librdkafka's rd_kafka_DeleteConsumerGroupOffsets is
not exposed in Python), kafkajs 2.2 and aiokafka 0.14 have no OffsetDelete at all, so kafka-python's
``KafkaAdminClient.delete_group_offsets`` deletes; confluent-kafka's ``list_consumer_group_offsets`` and a
confluent-kafka consumer of the group then see what the deletion left.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import kafka
import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError
from support.kafka_python import kafka_python_admin

RECORDS_PER_PARTITION = 10
COMMITTED = 7
DEADLINE_S = 30.0


def _fill(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(partitions):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(DEADLINE_S) == 0


def _commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit offsets for a group without joining it (a generation -1 commit, as simple consumers do)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _listed(bootstrap: str, group: str, partitions: list[TopicPartition]) -> dict[int, int]:
    """confluent-kafka's view of the group's committed offsets: partition -> offset (OFFSET_INVALID if none)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(tp.topic, tp.partition) for tp in partitions])
    result = admin.list_consumer_group_offsets([request])[group].result(DEADLINE_S)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def _first_offsets(consumer: Consumer, partitions: int) -> dict[int, int]:
    """The offset of the first record the subscribed consumer receives from each partition."""
    first: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE_S
    while len(first) < partitions:
        assert time.monotonic() < deadline, f"first records so far: {first}"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            first.setdefault(message.partition(), message.offset())
    return first


def test_deleted_offset_is_gone_and_the_group_restarts_per_auto_offset_reset(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    from conftest import unique_topic

    topic = make_topic("offdel", 2)
    group = unique_topic("offdel-group")
    _fill(bootstrap, topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    _commit(bootstrap, group, {tp0: COMMITTED, tp1: COMMITTED})
    assert _listed(bootstrap, group, [tp0, tp1]) == {0: COMMITTED, 1: COMMITTED}

    with kafka_python_admin(bootstrap) as admin:
        deleted = admin.delete_group_offsets(group, [kafka.TopicPartition(topic, 0)])
    assert deleted == {kafka.TopicPartition(topic, 0): NoError}
    assert _listed(bootstrap, group, [tp0, tp1]) == {0: OFFSET_INVALID, 1: COMMITTED}

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        # Partition 0 lost its offset: the consumer starts where auto.offset.reset says; partition 1 resumes.
        assert _first_offsets(consumer, 2) == {0: 0, 1: COMMITTED}
        # While the member is subscribed to the topic, its offsets stay (Kafka's GROUP_SUBSCRIBED_TO_TOPIC).
        with kafka_python_admin(bootstrap) as admin:
            refused = admin.delete_group_offsets(group, [kafka.TopicPartition(topic, 1)])
        assert refused == {kafka.TopicPartition(topic, 1): GroupSubscribedToTopicError}
        assert _listed(bootstrap, group, [tp1]) == {1: COMMITTED}
    finally:
        consumer.close()


def test_unknown_group_is_refused(bootstrap: str, make_topic: Callable[..., str]) -> None:
    from conftest import unique_topic

    topic = make_topic("offdel-unknown", 1)
    with kafka_python_admin(bootstrap) as admin, pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets(unique_topic("no-such-group"), [kafka.TopicPartition(topic, 0)])
