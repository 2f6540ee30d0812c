"""Each stock client on a three-broker cluster: kcat's metadata listing, and a replicated round trip (acks=all
writes, a consumer group reading them back) with kafka-python, aiokafka and kafkajs, whose partitions are led by
different brokers, so each client finds every leader from the cluster's Metadata; and confluent-kafka's view of topic
ids (KIP-516) from every broker."""

from __future__ import annotations

import asyncio
import base64
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import kafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka.admin import AdminClient, NewTopic
from support.cluster import Cluster
from support.kafkajs import kafkajs

RECORDS = 60


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running


def create(cluster: Cluster) -> str:
    name = f"stock-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(timeout=60)
    metadata = cluster.wait_for(lambda md: name in md.topics, name)
    assert {pm.leader for pm in metadata.topics[name].partitions.values()} == {1, 2, 3}
    return name


def test_kcat_lists_every_broker_and_each_partition_s_replicas_and_isr(cluster: Cluster) -> None:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (dev.py test installs it)"
    topic = create(cluster)
    listing = subprocess.run(
        [kcat, "-L", "-b", cluster.bootstrap, "-t", topic], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert " 3 brokers:" in listing
    for node_id, broker in cluster.brokers.items():
        assert f"broker {node_id} at 127.0.0.1:{broker.port}" in listing
    partitions = re.findall(r"partition (\d+), leader (\d+), replicas: ([\d,]+), isrs: ([\d,]+)", listing)
    assert len(partitions) == 3
    for _p, leader, replicas, isrs in partitions:
        assert sorted(replicas.split(",")) == ["1", "2", "3"] and sorted(isrs.split(",")) == ["1", "2", "3"]
        assert leader == replicas.split(",")[0]


def test_kafka_python_round_trip(cluster: Cluster) -> None:
    topic = create(cluster)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(RECORDS):
        producer.send(topic, f"kp-{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=f"kp-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    values = [m.value for m in consumer]
    consumer.close()
    assert sorted(values) == sorted(f"kp-{i}".encode() for i in range(RECORDS))


def test_aiokafka_round_trip(cluster: Cluster) -> None:
    topic = create(cluster)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send(topic, f"aio-{i}".encode(), partition=i % 3)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=cluster.bootstrap, group_id=f"aio-{uuid.uuid4()}", auto_offset_reset="earliest"
        )
        await consumer.start()
        values: list[bytes] = []
        try:
            while len(values) < RECORDS:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                values += [m.value for records in batches.values() for m in records]
        finally:
            await consumer.stop()
        return values

    values = asyncio.run(run())
    assert sorted(values) == sorted(f"aio-{i}".encode() for i in range(RECORDS))


def test_kafkajs_round_trip(cluster: Cluster) -> None:
    topic = create(cluster)
    records = [
        {"key": None, "value": _b64(f"js-{i}".encode()), "headers": [], "timestamp": 1_700_000_000_000 + i}
        for i in range(RECORDS)
    ]
    delivered = kafkajs(
        cluster.bootstrap, "produce", topic=topic, partitions=3, records=records, idempotent=True, chunk=20
    )["delivered"]
    assert len(delivered) == RECORDS
    consumed = kafkajs(
        cluster.bootstrap, "consume", topic=topic, groupId=f"js-{uuid.uuid4()}", expected=RECORDS, idleMs=500
    )["consumed"]
    assert sorted(c["value"] for c in consumed) == sorted(r["value"] for r in records)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_confluent_sees_one_topic_id_on_every_broker_and_a_new_one_after_recreation(cluster: Cluster) -> None:
    """Topic ids (KIP-516) on a cluster: every broker answers the id etcd holds (Metadata v12) and records it in each
    replica's ``partition.metadata``; a recreated topic has a new id everywhere, and librdkafka fails a message
    queued for a partition the recreated topic lacks instead of stranding it."""
    from confluent_kafka import KafkaError, Producer, TopicCollection
    from oncelog.storage.partition_metadata import read_topic_id

    topic = create(cluster)

    def ids() -> set[str]:
        seen = set()
        for broker in cluster.brokers.values():
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            seen.add(str(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id))
        return seen

    [old_id] = ids()
    recorded = {
        read_topic_id(broker.data_dir / f"{topic}-{p}") for broker in cluster.brokers.values() for p in range(3)
    }
    # librdkafka prints an id in standard base64 without padding (Kafka's own tools use the URL-safe alphabet):
    # compare the 16 bytes.
    assert [i.bytes for i in recorded] == [base64.b64decode(old_id + "==")]

    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 120_000})
    producer.produce(topic, b"before", partition=2)
    assert producer.flush(30) == 0
    admin = cluster.admin()  # held: a client dropped while its request is out destroys the request
    admin.delete_topics([topic])[topic].result(timeout=60)
    cluster.wait_for(lambda md: topic not in md.topics, f"{topic} deleted")
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(timeout=60)
    cluster.wait_for(lambda md: topic in md.topics, topic)
    [new_id] = ids()
    assert new_id != old_id
    producer.produce(topic, b"after", partition=2, on_delivery=lambda e, m: reports.append(e))
    assert producer.flush(30) == 0
    assert [e.code() if e else None for e in reports] == [KafkaError._UNKNOWN_PARTITION]


def test_confluent_kip848_group_round_trip(cluster: Cluster) -> None:
    """A ``group.protocol=consumer`` (KIP-848) group on the cluster: its coordinator (the leader of its
    ``__consumer_offsets`` partition) assigns partitions led by every broker; the committed offsets are read back."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = create(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, f"848-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    group = f"kip848-{uuid.uuid4()}"
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"848-{i}".encode() for i in range(RECORDS))
    assert [tp.offset for tp in committed] == [RECORDS // 3] * 3
