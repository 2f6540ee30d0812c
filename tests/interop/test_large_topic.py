"""Interop: confluent-kafka (librdkafka) creates a 2,000-partition topic and writes to every partition right after
CreateTopics succeeds: the success is sent once every partition log exists, so no partition is missing or leaderless."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.broker import BrokerProcess

PARTITIONS = 2000
NODE = 1  # node.id default


def test_every_partition_of_a_new_2000_partition_topic_takes_a_write_at_once(own_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    futures = admin.create_topics([NewTopic("wide", PARTITIONS, 1)], request_timeout=120, operation_timeout=120)
    futures["wide"].result(timeout=150)

    # The first Metadata after the success already shows every partition led by the broker.
    topic = admin.list_topics(topic="wide", timeout=15).topics["wide"]
    assert topic.error is None and len(topic.partitions) == PARTITIONS
    assert {(p.leader, p.error) for p in topic.partitions.values()} == {(NODE, None)}

    delivered: list[tuple[object, int, int]] = []
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all", "linger.ms": 5})
    for partition in range(PARTITIONS):
        producer.produce(
            "wide",
            value=b"%d" % partition,
            partition=partition,
            on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
        )
    assert producer.flush(120) == 0
    assert sorted(delivered, key=lambda d: d[1]) == [(None, p, 0) for p in range(PARTITIONS)]
