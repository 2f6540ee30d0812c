"""Transactions and consumer groups on a three-broker cluster in steady state (stock confluent-kafka clients): the
transaction coordinator is the leader of the id's ``__transaction_state`` partition, markers reach partitions led by
the other brokers over inter-broker WriteTxnMarkers, and each group's coordinator is the leader of its
``__consumer_offsets`` partition."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from support.cluster import KAFKA_COMMIT_ORDER, Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running


def create(cluster: Cluster, name: str, partitions: int) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(timeout=60)
    cluster.wait_for(lambda md: name in md.topics, name)


def consume_all(cluster: Cluster, topic: str, expected: int, **conf: object) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            **conf,
        }
    )
    consumer.subscribe([topic])
    records: list[tuple[int, bytes]] = []
    at_end: set[int] = set()
    try:
        for _ in range(300):
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    if len(records) >= expected and len(at_end) == len(consumer.assignment()):
                        break
                    continue
                raise AssertionError(message.error())
            records.append((message.partition(), message.value()))
    finally:
        consumer.close()
    return records


def test_committed_records_on_partitions_led_by_every_broker_are_visible_and_aborted_ones_are_not(
    cluster: Cluster,
) -> None:
    create(cluster, "txn-spread", partitions=3)
    leaders = {p.leader for p in cluster.metadata().topics["txn-spread"].partitions.values()}
    assert leaders == {1, 2, 3}  # the transaction's partitions are led by three brokers
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "spread-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("txn-spread", f"committed-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("txn-spread", f"aborted-{i}".encode(), partition=i % 3)
    producer.abort_transaction(30)
    records = consume_all(cluster, "txn-spread", 30)
    assert sorted(v for _, v in records) == sorted(f"committed-{i}".encode() for i in range(30))


def test_offsets_sent_to_a_transaction_are_committed_with_it(cluster: Cluster) -> None:
    create(cluster, "txn-offsets-in", partitions=3)
    create(cluster, "txn-offsets-out", partitions=3)
    seed = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(9):
        seed.produce("txn-offsets-in", f"in-{i}".encode(), partition=i % 3)
    assert seed.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "copier",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["txn-offsets-in"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "copier-1"})
    producer.init_transactions(30)
    copied = 0
    try:
        producer.begin_transaction()
        while copied < 9:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            producer.produce("txn-offsets-out", message.value().replace(b"in", b"out"), partition=message.partition())
            copied += 1
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        committed = consumer.committed([TopicPartition("txn-offsets-in", p) for p in range(3)], timeout=30)
    finally:
        consumer.close()
    assert sorted(tp.offset for tp in committed) == [3, 3, 3]
    out = consume_all(cluster, "txn-offsets-out", 9)
    assert sorted(v for _, v in out) == sorted(f"out-{i}".encode() for i in range(9))


def test_with_kafkas_commit_order_committed_transactions_are_visible_and_aborted_ones_never() -> None:
    """``transaction.marker.wait.ms=0``: EndTxn is answered once PrepareCommit/PrepareAbort is durable and the
    markers follow in the background, as in Kafka, so back-to-back transactions meet CONCURRENT_TRANSACTIONS while
    the previous one's markers are written (librdkafka retries). Every committed record is read once by a
    read_committed reader, no aborted one ever."""
    client_log = logging.getLogger(f"rdkafka-{uuid.uuid4()}")
    client_log.setLevel(logging.DEBUG)
    lines: list[str] = []
    client_log.addHandler(_Collect(lines))
    with Cluster(3, settings=KAFKA_COMMIT_ORDER) as cluster:
        create(cluster, "kafka-order", partitions=3)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": "kafka-order-1",
                "debug": "eos",
                "logger": client_log,
            }
        )
        producer.init_transactions(30)
        committed = []
        for txn in range(12):
            producer.begin_transaction()
            values = [f"{txn}-{i}".encode() for i in range(30)]
            for i, value in enumerate(values):
                producer.produce("kafka-order", value, partition=i % 3)
            if txn % 3 == 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
                committed.extend(values)
        records = consume_all(cluster, "kafka-order", len(committed))
    assert sorted(v for _, v in records) == sorted(committed)
    # The next transaction did meet the previous one's markers still under way (Kafka's order, not oncelog's).
    assert any("AddPartitionsToTxn" in line and "concurrent operation" in line for line in lines)


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
