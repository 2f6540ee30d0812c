"""Transaction coordinator failover on a three-broker cluster (stock confluent-kafka clients, real processes): the
broker coordinating a transactional id dies by SIGKILL at a fault point (``ONCELOG_FAULTS``, set on that broker
only) after the transaction's outcome is decided in ``__transaction_state``; the broker that takes over the id's
partition loads it and finishes the transaction as decided, on partitions led by every broker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from oncelog.protocol.internal.java_hash import partition_for_key
from support.cluster import Cluster

TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 50
#: The broker started with the fault point: it coordinates the transactional id under test.
DOOMED = 1
TOPIC = "orders"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers, the first with ``ONCELOG_FAULTS`` = the test's parameter."""
    running = Cluster(3)
    running.brokers[DOOMED].env = {"ONCELOG_FAULTS": request.param}
    try:
        running.start()
        yield running
    finally:
        running.close()


def prepare(cluster: Cluster) -> str:
    """The data topic (three partitions led by three brokers) and ``__transaction_state``; returns a transactional
    id the doomed broker coordinates."""
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(60)
    md = cluster.wait_for(lambda md: TOPIC in md.topics, TOPIC)
    assert {p.leader for p in md.topics[TOPIC].partitions.values()} == {1, 2, 3}
    warmup = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warmup"})
    warmup.init_transactions(60)  # FindCoordinator creates __transaction_state
    md = cluster.wait_for(
        lambda md: TXN_STATE in md.topics
        and len(md.topics[TXN_STATE].partitions) == TXN_STATE_PARTITIONS
        and all(p.leader > 0 for p in md.topics[TXN_STATE].partitions.values()),
        TXN_STATE,
    )
    leaders = {p: pm.leader for p, pm in md.topics[TXN_STATE].partitions.items()}
    return next(
        tid
        for tid in (f"orders-writer-{i}" for i in range(1000))
        if leaders[partition_for_key(tid, TXN_STATE_PARTITIONS)] == DOOMED
    )


def read_committed(cluster: Cluster, expected: int, deadline_s: float = 60.0) -> list[bytes]:
    """Values a read_committed reader sees in every partition of TOPIC once it has ``expected`` of them and has
    reached each partition's end (assign: no group coordinator involved)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(3)])
        end = time.monotonic() + deadline_s
        while (len(values) < expected or len(at_end) < 3) and time.monotonic() < end:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                values.append(message.value())
    finally:
        consumer.close()
    return values


def end_transaction(producer: Producer, commit: bool) -> None:
    """Commit or abort; the coordinator may die under it (the test checks the outcome by reading)."""
    try:
        (producer.commit_transaction if commit else producer.abort_transaction)(60)
    except KafkaException:
        pass


def transaction_after(cluster: Cluster, transactional_id: str) -> list[bytes]:
    """A new producer with the same id (another broker coordinates it now) commits three records."""
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    values = [f"after-{i}".encode() for i in range(3)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i)
    producer.commit_transaction(60)
    return values


@pytest.mark.parametrize("cluster", ["txn.after_prepare", "txn.after_first_marker"], indirect=True)
def test_a_commit_decided_by_a_coordinator_killed_before_its_markers_is_finished_by_the_next(
    cluster: Cluster,
) -> None:
    transactional_id = prepare(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    committed = [f"committed-{i}".encode() for i in range(30)]
    for i, value in enumerate(committed):
        producer.produce(TOPIC, value, partition=i % 3)
    assert producer.flush(30) == 0
    end_transaction(producer, commit=True)
    assert cluster.brokers[DOOMED].wait_exit(60) != 0  # killed at the fault point, after PrepareCommit
    # The other brokers lead every partition now, the id's __transaction_state partition included.
    cluster.wait_for(
        lambda md: all(p.leader not in (DOOMED, -1) for p in md.topics[TOPIC].partitions.values()),
        "new leaders",
        via=2,
    )
    seen = read_committed(cluster, len(committed))
    assert sorted(seen) == sorted(committed)
    after = transaction_after(cluster, transactional_id)
    assert sorted(read_committed(cluster, len(committed) + 3)) == sorted(committed + after)


@pytest.mark.parametrize("cluster", ["txn.after_first_marker"], indirect=True)
def test_b_an_abort_decided_by_a_killed_coordinator_leaves_nothing_visible(cluster: Cluster) -> None:
    transactional_id = prepare(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, f"aborted-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    end_transaction(producer, commit=False)
    assert cluster.brokers[DOOMED].wait_exit(60) != 0  # killed after PrepareAbort and one marker
    # The next producer of the id is served by the new coordinator once it completed the abort; its records are
    # the only ones a read_committed reader sees (every partition's last stable offset moved past the abort).
    after = transaction_after(cluster, transactional_id)
    assert sorted(read_committed(cluster, len(after))) == sorted(after)
