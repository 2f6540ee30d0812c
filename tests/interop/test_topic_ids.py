"""Interop: topic ids (KIP-516) with stock clients.

- confluent-kafka (librdkafka 2.16: Metadata v12, Fetch v13 when offered): a topic's id is described, and a recreated
  topic has a new one; a producer's queued messages for a partition a recreated topic no longer has are failed at
  once (librdkafka sees the new id and the smaller partition count) instead of stranded; a consumer whose fetch
  waits on a topic recreated meanwhile is told the topic id changed, instead of reading the new topic's records
  from the old position.
- kafka-python (3.0: Metadata v12 and DeleteTopics v6 by id in its admin client): describe and delete by id.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.errors import UnknownTopicIdError
from support.topics import DEADLINE_S, create_topic_confluent

#: Far beyond the test's deadlines: a message failed within them was failed by the client's metadata, not its timeout.
MESSAGE_TIMEOUT_MS = 120_000


def _topic_id(admin: AdminClient, name: str) -> str:
    described = admin.describe_topics(TopicCollection([name]))[name].result(DEADLINE_S)
    return str(described.topic_id)


def _delete(admin: AdminClient, name: str) -> None:
    admin.delete_topics([name], operation_timeout=10)[name].result(DEADLINE_S)


def test_confluent_describes_ids_and_a_recreated_topic_has_a_new_one(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = make_topic("ids", 2)
    old_id = _topic_id(admin, name)
    assert old_id != "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID: what a broker without ids answers
    _delete(admin, name)
    create_topic_confluent(bootstrap, name, 2)
    assert _topic_id(admin, name) not in (old_id, "AAAAAAAAAAAAAAAAAAAAAA")


def test_confluent_producer_fails_messages_for_partitions_a_recreated_topic_lacks(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = make_topic("shrunk", 3)
    reports: list[tuple[str, KafkaError | None]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": MESSAGE_TIMEOUT_MS})
    producer.produce(name, b"before", partition=2, on_delivery=lambda e, m: reports.append(("before", e)))
    assert producer.flush(DEADLINE_S) == 0
    _delete(admin, name)
    create_topic_confluent(bootstrap, name, 1)
    # The producer still knows three partitions: the message is queued for partition 2.
    started = time.monotonic()
    producer.produce(name, b"after", partition=2, on_delivery=lambda e, m: reports.append(("after", e)))
    assert producer.flush(DEADLINE_S) == 0, "the message for the vanished partition is stranded"
    assert time.monotonic() - started < DEADLINE_S
    assert [(what, e.code() if e else None) for what, e in reports] == [
        ("before", None),
        ("after", KafkaError._UNKNOWN_PARTITION),
    ]


def test_confluent_consumer_waiting_on_a_recreated_topic_is_told_the_id_changed(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = make_topic("refetched", 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(2):
        producer.produce(name, b"old-%d" % i, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    # A long fetch wait: once it has read the old records, the consumer's next fetch waits at their end.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": name, "enable.auto.commit": False, "fetch.wait.max.ms": 20_000}
    )
    try:
        consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        old: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(old) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                old.append(message.value())
        assert old == [b"old-0", b"old-1"]
        time.sleep(0.5)  # its fetch at offset 2 is parked now
        _delete(admin, name)
        create_topic_confluent(bootstrap, name, 1)
        for i in range(4):
            producer.produce(name, b"new-%d" % i, partition=0)
        assert producer.flush(DEADLINE_S) == 0
        seen: list[object] = []
        deadline = time.monotonic() + DEADLINE_S
        while not seen and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                seen.append(message.error().code() if message.error() else message.value())
        # Without ids the waiting fetch answers the new topic's records from offset 2 on (b"new-2") as if they
        # followed the old ones.
        assert seen == [KafkaError.INCONSISTENT_TOPIC_ID]
    finally:
        consumer.close()


def test_kafka_python_describes_and_deletes_by_id(bootstrap: str, make_topic: Callable[..., str]) -> None:
    name = make_topic("kp-ids", 2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [by_name] = admin.describe_topics([name])
        topic_id = uuid.UUID(by_name["topic_id"])  # its admin results print ids as UUID strings
        assert topic_id.int != 0
        [by_id] = admin.describe_topics([topic_id])
        assert (by_id["error_code"], by_id["name"], len(by_id["partitions"])) == (0, name, 2)
        deleted = admin.delete_topics([topic_id])
        assert [(t["name"], t["topic_id"], t["error_code"]) for t in deleted["topics"]] == [(name, str(topic_id), 0)]
        [gone] = admin.describe_topics([topic_id])
        assert (gone["error_code"], gone["name"]) == (UnknownTopicIdError.errno, None)
        with pytest.raises(UnknownTopicIdError):
            admin.delete_topics([topic_id])
    finally:
        admin.close()
