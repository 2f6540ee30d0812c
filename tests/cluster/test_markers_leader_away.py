"""A partition leader away while its transaction marker is due (three brokers, stock confluent-kafka clients).

The transaction spans partitions led by each broker (replication factor 1, so the away partition has no other
leader to move to). Its leader is paused (SIGSTOP) after the transaction's records are acknowledged and before
EndTxn: the coordinator writes the markers of the other two partitions at once, so a read_committed reader sees them
(and records produced after them) while the leader is still away; the away partition's marker is delivered when its
leader is back, and its records become visible then, without the producer doing anything. An aborted transaction in
the same situation is never seen, in part or whole, by a read_committed reader, before or after the leader returns.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from oncelog.protocol.internal.java_hash import partition_for_key
from support.cluster import SESSION_TIMEOUT_MS, Cluster
from support.committed import read_committed_values

TOPIC = "away"
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 50
#: The partition whose leader is paused.
AWAY_PARTITION = 2
#: How long a reader waits for what it expects.
READ_DEADLINE_S = 30.0


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running
        for broker in running.brokers.values():
            broker.kill()  # a controlled shutdown waits ~10 s for replication-factor-1 leaderships to move


def read_committed(
    cluster: Cluster, partitions: tuple[int, ...], done: Callable[[list[bytes]], bool], bootstrap: str
) -> list[bytes]:
    return read_committed_values(bootstrap, TOPIC, partitions, done, READ_DEADLINE_S)


def produce_all(producer: Producer, prefix: str, per_partition: int = 5) -> dict[int, list[bytes]]:
    values = {p: [f"{prefix}-{p}-{i}".encode() for i in range(per_partition)] for p in range(3)}
    for partition, batch in values.items():
        for value in batch:
            producer.produce(TOPIC, value, partition=partition)
    assert producer.flush(30) == 0
    return values


class Paused:
    """SIGSTOP a broker; ``resume`` (or leaving the block) sends SIGCONT."""

    def __init__(self, cluster: Cluster, broker: int) -> None:
        self._cluster = cluster
        self._pid = cluster.brokers[broker].pid
        self._broker = broker
        self._paused = False

    def __enter__(self) -> Paused:
        os.kill(self._pid, signal.SIGSTOP)
        self._paused = True
        return self

    def resume(self) -> None:
        if self._paused:
            os.kill(self._pid, signal.SIGCONT)
            self._paused = False

    def __exit__(self, *exc: object) -> None:
        self.resume()


def transactional_id(cluster: Cluster, coordinator: int) -> str:
    """An id whose ``__transaction_state`` partition ``coordinator`` leads."""
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warmup"}).init_transactions(60)
    md = cluster.wait_for(
        lambda md: (
            TXN_STATE in md.topics
            and len(md.topics[TXN_STATE].partitions) == TXN_STATE_PARTITIONS
            and all(p.leader > 0 for p in md.topics[TXN_STATE].partitions.values())
        ),
        TXN_STATE,
    )
    leaders = {p: pm.leader for p, pm in md.topics[TXN_STATE].partitions.items()}
    return next(
        tid
        for tid in (f"away-writer-{i}" for i in range(1000))
        if leaders[partition_for_key(tid, TXN_STATE_PARTITIONS)] == coordinator
    )


def test_markers_of_present_leaders_are_written_at_once_and_the_away_one_when_it_returns(cluster: Cluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(60)
    md = cluster.wait_for(lambda md: TOPIC in md.topics and len(md.topics[TOPIC].partitions) == 3, TOPIC)
    leaders = {p: pm.leader for p, pm in md.topics[TOPIC].partitions.items()}
    away = leaders[AWAY_PARTITION]
    present_partitions = tuple(p for p, leader in leaders.items() if leader != away)
    assert len(set(leaders.values())) == 3, leaders  # one partition per broker
    coordinator = min(b for b in cluster.brokers if b != away)
    present = ",".join(cluster.brokers[b].bootstrap for b in cluster.brokers if b != away)
    tid = transactional_id(cluster, coordinator)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    producer.init_transactions(60)
    probe = Producer({"bootstrap.servers": present, "enable.idempotence": True})

    # A commit whose marker for AWAY_PARTITION is due while its leader is paused.
    producer.begin_transaction()
    committed = produce_all(producer, "committed")
    with Paused(cluster, away) as paused:
        producer.commit_transaction(60)  # answered once PrepareCommit is durable and the markers wait
        for p in present_partitions:  # the last stable offset moved past the transaction: a later write is visible
            probe.produce(TOPIC, f"probe-1-{p}".encode(), partition=p)
        assert probe.flush(30) == 0
        want = {v for p in present_partitions for v in committed[p]} | {
            f"probe-1-{p}".encode() for p in present_partitions
        }
        seen = read_committed(cluster, present_partitions, lambda vs: want <= set(vs), present)
        assert set(seen) == want, "the present partitions' markers waited for the away leader"
        paused.resume()
    # Back (it registers again and leads its partition again): its marker is delivered, nobody asks for it.
    seen = read_committed(
        cluster, (AWAY_PARTITION,), lambda vs: set(committed[AWAY_PARTITION]) <= set(vs), cluster.bootstrap
    )
    assert seen == committed[AWAY_PARTITION]

    # An abort in the same situation: never seen, in part or whole.
    producer.begin_transaction()  # CONCURRENT_TRANSACTIONS until the commit above completed; librdkafka retries
    aborted = produce_all(producer, "aborted")
    aborted_values = {v for vs in aborted.values() for v in vs}
    with Paused(cluster, away) as paused:
        producer.abort_transaction(60)
        for p in present_partitions:
            probe.produce(TOPIC, f"probe-2-{p}".encode(), partition=p)
        assert probe.flush(30) == 0
        want |= {f"probe-2-{p}".encode() for p in present_partitions}
        seen = read_committed(cluster, present_partitions, lambda vs: want <= set(vs), present)
        assert set(seen) == want and not aborted_values & set(seen)
        time.sleep(SESSION_TIMEOUT_MS / 1000)  # away long enough to lose its session and leadership
        paused.resume()
    # Back: its aborted records stay invisible, and a transaction after it is read whole, in order.
    seen = read_committed(cluster, (AWAY_PARTITION,), lambda vs: len(vs) >= 5, cluster.bootstrap)
    assert seen == committed[AWAY_PARTITION]
    producer.begin_transaction()
    after = produce_all(producer, "after")
    producer.commit_transaction(60)
    expected = want | {v for vs in committed.values() for v in vs} | {v for vs in after.values() for v in vs}
    everything = read_committed(cluster, (0, 1, 2), lambda vs: expected <= set(vs), cluster.bootstrap)
    assert sorted(everything) == sorted(expected)
    assert not aborted_values & set(everything)
    probe.flush(10)
