"""Interop: confluent-kafka (librdkafka 2.16) against the broker under test."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from support.confluent_io import consume_all, produce_all
from support.dataset import CODECS, SampleRecord, check_roundtrip, java_partition, make_records
from support.topics import wait_topic_visible

N_RECORDS = 10_000
PARTITIONS = 3


def test_admin_create_topics(bootstrap: str) -> None:
    from conftest import unique_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = unique_topic("ck-admin")
    admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=10)[name].result(timeout=15)
    wait_topic_visible(admin, name, PARTITIONS)

    again = admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=10)[name]
    with pytest.raises(KafkaException) as exc:
        again.result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    bad = "bad topic name!"
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(bad, 1, 1)], operation_timeout=10)[bad].result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, code 17
    assert bad not in admin.list_topics(timeout=5).topics


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(bootstrap: str, make_topic, codec: str) -> None:
    topic = make_topic(f"ck-{codec}", PARTITIONS)
    records = make_records(N_RECORDS, seed=hash(codec) & 0xFFFF)
    delivered = produce_all(bootstrap, topic, records, **{"compression.type": codec})
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records))  # librdkafka default: read_committed
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


def test_idempotent_producer_offsets(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-idem", PARTITIONS)
    records = make_records(N_RECORDS, seed=7)
    delivered = produce_all(
        bootstrap,
        topic,
        records,
        **{"enable.idempotence": True, "compression.type": "lz4", "max.in.flight.requests.per.connection": 5},
    )
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records), **{"isolation.level": "read_uncommitted"})
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)
    offsets = [(d.partition, d.offset) for d in delivered]
    assert len(set(offsets)) == len(offsets)


def test_create_partitions_then_a_key_lands_on_a_new_partition(bootstrap: str, make_topic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-grow", 2)
    key = next(k for k in (b"key-%d" % i for i in range(1000)) if java_partition(k, 4) >= 2)
    admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=10)[topic].result(timeout=15)
    wait_topic_visible(admin, topic, 4)

    for count, code in ((4, KafkaError.INVALID_PARTITIONS), (3, KafkaError.INVALID_PARTITIONS)):
        with pytest.raises(KafkaException) as exc:
            admin.create_partitions([NewPartitions(topic, count)], operation_timeout=10)[topic].result(timeout=15)
        assert exc.value.args[0].code() == code
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([NewPartitions(topic, 5, [[7]])])[topic].result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT

    # librdkafka's murmur2_random is Java's murmur2: the key goes to a partition that did not exist before.
    records = [SampleRecord(key, b"grown", (), 1_700_000_000_000)]
    delivered = produce_all(bootstrap, topic, records)
    assert [(d.partition, d.offset) for d in delivered] == [(java_partition(key, 4), 0)]
    consumed = consume_all(bootstrap, topic, 4, 1)
    assert [(c.partition, c.key, c.value) for c in consumed] == [(java_partition(key, 4), key, b"grown")]


def test_group_member_is_assigned_new_partitions_after_growth(bootstrap: str, make_topic) -> None:
    from conftest import unique_topic

    topic = make_topic("ck-grow-grp", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=b"p0-before", partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("ck-grow-grp"),
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    seen: list[tuple[int, bytes]] = []

    def poll_until(done, deadline_s: float = 40.0) -> None:
        end = time.monotonic() + deadline_s
        while not done():
            assert time.monotonic() < end, f"assigned {consumer.assignment()}, read {seen}"
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.partition(), message.value()))

    try:
        consumer.subscribe([topic])
        poll_until(lambda: (0, b"p0-before") in seen)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=15)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})  # the first one knows 1 partition
        for partition in (1, 2):
            producer.produce(topic, value=b"p%d-after" % partition, partition=partition)
        assert producer.flush(15) == 0
        # librdkafka sees the new count on its next metadata refresh and rejoins; earliest reads the new records.
        poll_until(lambda: {(1, b"p1-after"), (2, b"p2-after")} <= set(seen))
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
        assert sorted(seen) == [(0, b"p0-before"), (1, b"p1-after"), (2, b"p2-after")]
    finally:
        consumer.close()


def test_describe_cluster_names_the_cluster_and_this_node(bootstrap: str) -> None:
    # librdkafka (2.16) answers describe_cluster from a Metadata request, not DescribeCluster (API 60); the
    # kafka-python test covers API 60.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    host, port = bootstrap.rsplit(":", 1)
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert described.cluster_id == metadata.cluster_id and described.cluster_id
    assert [(n.id, n.host, n.port, n.rack) for n in described.nodes] == [(1, host, int(port), None)]
    assert described.controller.id == 1
    assert described.authorized_operations is None  # not requested
    # Asked for, they are all of the cluster's operations, as Kafka answers without an authorizer.
    with_ops = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=15)
    assert {op.name for op in with_ops.authorized_operations} == {
        "CREATE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    }
