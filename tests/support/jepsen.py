"""A Jepsen-style workload and checker for a partitioned cluster (stock confluent-kafka clients).

Writers record every operation and its outcome; readers record every record they see with its offset; ``check``
looks at the whole history afterwards. Clients connect to the brokers directly (``PartitionedCluster``), so they
keep talking to a broker that the network cut off from the others, as clients on its side of a partition would.

- ``IdempotentWriter``: acks=all, enable.idempotence; a write is acknowledged with its (partition, offset).
- ``TransactionalWriter``: transactions of a few records over every partition, committed or (one in four) aborted on
  purpose. A transaction whose commit was answered is committed; one whose abort was answered, or that never got to
  its commit, is aborted; one whose commit failed without an answer is indeterminate (either outcome is allowed, but
  all of it or none of it).
- ``Reader``: read_committed, assign (no group), from the start of every partition.

``check`` reports: a lost acknowledged write (acknowledged, or a committed transaction's record, missing from the
final read), a duplicate (one value at two offsets), two values at one offset (across every read, and an
acknowledged offset holding another value), an aborted read (a record of an aborted transaction), a read of an
uncommitted write (part of an indeterminate transaction missing, or a record nobody wrote).
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from oncelog.protocol.internal.java_hash import partition_for_key

from .partitioned_cluster import PartitionedCluster

PARTITIONS = 3
TXN_STATE = "__transaction_state"
RECORDS_PER_TXN = 6
#: Kafka's default is 60 s; short so a transaction the zombie side left open is aborted by the new coordinator soon.
TXN_TIMEOUT_MS = 10000
#: How long librdkafka keeps trying to deliver one record (a partition whose leader is cut off).
MESSAGE_TIMEOUT_MS = 20000
API_TIMEOUT_S = 20.0
COMMITTED, ABORTED, INDETERMINATE = "committed", "aborted", "indeterminate"


@dataclass
class History:
    #: value -> (partition, offset) of acknowledged idempotent writes.
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    #: Idempotent writes that failed (may or may not be in the log).
    failed: set[bytes] = field(default_factory=set)
    #: transaction number -> (its values, its outcome).
    txns: dict[int, tuple[list[bytes], str]] = field(default_factory=dict)
    #: (partition, offset, value) of every record a concurrent reader saw.
    reads: list[tuple[int, int, bytes]] = field(default_factory=list)
    #: (partition, offset, value) of the final read, after healing.
    final: list[tuple[int, int, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self) -> dict[str, int]:
        outcomes = collections.Counter(outcome for _, outcome in self.txns.values())
        return {
            "acked": len(self.acked),
            "failed": len(self.failed),
            "committed_txns": outcomes[COMMITTED],
            "aborted_txns": outcomes[ABORTED],
            "indeterminate_txns": outcomes[INDETERMINATE],
            "reads": len(self.reads),
            "final": len(self.final),
        }


def check(history: History) -> list[str]:
    """Every anomaly in ``history`` (empty: none)."""
    problems: list[str] = []
    at_offset: dict[tuple[int, int], set[bytes]] = collections.defaultdict(set)
    for partition, offset, value in history.reads + history.final:
        at_offset[(partition, offset)].add(value)
    problems += [f"two values at {where}: {sorted(values)}" for where, values in at_offset.items() if len(values) > 1]
    for value, where in history.acked.items():
        seen = at_offset.get(where, set())
        if seen and value not in seen:
            problems.append(f"acknowledged {value!r} at {where} but {sorted(seen)} is there")
    final_offsets: dict[bytes, set[tuple[int, int]]] = collections.defaultdict(set)
    for partition, offset, value in history.final:
        final_offsets[value].add((partition, offset))
    problems += [f"duplicate {value!r} at {sorted(w)}" for value, w in final_offsets.items() if len(w) > 1]
    problems += [
        f"lost acknowledged write {value!r} at {w}" for value, w in history.acked.items() if value not in final_offsets
    ]
    written = set(history.acked) | history.failed
    outcome_of: dict[bytes, str] = {}
    for number, (values, outcome) in history.txns.items():
        written.update(values)
        outcome_of.update(dict.fromkeys(values, outcome))
        present = [v for v in values if v in final_offsets]
        if outcome == COMMITTED and len(present) < len(values):
            problems.append(f"lost committed transaction {number}: {len(values) - len(present)} of its records")
        if outcome == INDETERMINATE and 0 < len(present) < len(values):
            problems.append(f"uncommitted read: part of transaction {number} ({len(present)} of {len(values)})")
    seen_values = {value for _, _, value in history.reads + history.final}
    problems += [f"aborted read {v!r}" for v in sorted(seen_values) if outcome_of.get(v) == ABORTED]
    problems += [f"read of a value never written {v!r}" for v in sorted(seen_values - written)]
    return problems


class _Worker(threading.Thread):
    def __init__(self, bootstrap: str, history: History) -> None:
        super().__init__(daemon=True, name=type(self).__name__)
        self.bootstrap = bootstrap
        self.history = history
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def work(self) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 90.0) -> None:
        self.stopping.set()
        self.join(timeout_s)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error


class IdempotentWriter(_Worker):
    def __init__(self, bootstrap: str, history: History, topic: str, interval_s: float = 0.01) -> None:
        super().__init__(bootstrap, history)
        self.topic, self.interval_s = topic, interval_s

    def work(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            }
        )

        def report(err: KafkaError | None, msg: object) -> None:
            with self.history.lock:
                if err is None:
                    self.history.acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
                else:
                    self.history.failed.add(msg.value())  # type: ignore[attr-defined]

        n = 0
        while not self.stopping.is_set():
            value = f"w{n}".encode()
            try:
                producer.produce(self.topic, value, partition=n % PARTITIONS, on_delivery=report)
            except BufferError:
                producer.poll(0.1)
                continue
            n += 1
            producer.poll(self.interval_s)
        producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 10)


class TransactionalWriter(_Worker):
    def __init__(self, bootstrap: str, history: History, topic: str, transactional_id: str, seed: int = 0) -> None:
        super().__init__(bootstrap, history)
        self.topic, self.transactional_id = topic, transactional_id
        self.random = random.Random(seed)
        self.producer: Producer | None = None
        self.restarts = 0

    def _new_producer(self) -> Producer:
        while True:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": TXN_TIMEOUT_MS,
                    "message.timeout.ms": TXN_TIMEOUT_MS,
                }
            )
            try:
                producer.init_transactions(API_TIMEOUT_S)
                return producer
            except KafkaException:
                self.restarts += 1
                time.sleep(0.5)

    def work(self) -> None:
        producer = self._new_producer()
        number = 0
        while not self.stopping.is_set():
            number += 1
            values = [f"t{number}-{i}".encode() for i in range(RECORDS_PER_TXN)]
            commit = self.random.random() >= 0.25
            outcome = ABORTED
            try:
                producer.begin_transaction()
                for i, value in enumerate(values):
                    producer.produce(self.topic, value, partition=i % PARTITIONS)
                if producer.flush(TXN_TIMEOUT_MS / 1000) != 0:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush", txn_requires_abort=True))
                if commit:
                    outcome = INDETERMINATE
                    producer.commit_transaction(API_TIMEOUT_S)
                    outcome = COMMITTED
                else:
                    producer.abort_transaction(API_TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                if outcome == INDETERMINATE and error.retriable():
                    outcome = self._retry_commit(producer)
                elif error.txn_requires_abort():
                    try:
                        producer.abort_transaction(API_TIMEOUT_S)
                        outcome = ABORTED
                    except KafkaException:
                        outcome = INDETERMINATE if outcome == INDETERMINATE else self._lost(outcome)
                        producer = self._new_producer()
                else:
                    outcome = self._lost(outcome)
                    producer = self._new_producer()
            with self.history.lock:
                self.history.txns[number] = (values, outcome)
        producer.flush(5)

    def _lost(self, outcome: str) -> str:
        """The producer is unusable: a commit in flight may have been decided; anything else is aborted by the
        next producer's InitProducerId (or the coordinator's timeout)."""
        self.restarts += 1
        return INDETERMINATE if outcome == INDETERMINATE else ABORTED

    def _retry_commit(self, producer: Producer) -> str:
        try:
            producer.commit_transaction(API_TIMEOUT_S)
            return COMMITTED
        except KafkaException:
            return INDETERMINATE


class Reader(_Worker):
    """read_committed from the start of each partition; ``final`` mode stops at every partition's end."""

    def __init__(self, bootstrap: str, history: History, topic: str, *, final: bool = False) -> None:
        super().__init__(bootstrap, history)
        self.topic, self.final = topic, final

    def work(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "jepsen-unused",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        into = self.history.final if self.final else self.history.reads
        at_end: set[int] = set()
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
            while not self.stopping.is_set() and not (self.final and len(at_end) == PARTITIONS):
                for message in consumer.consume(num_messages=500, timeout=0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            at_end.add(message.partition())
                        continue
                    at_end.discard(message.partition())
                    with self.history.lock:
                        into.append((message.partition(), message.offset(), message.value()))
        finally:
            consumer.close()


def final_read(bootstrap: str, history: History, topic: str, timeout_s: float = 60.0) -> None:
    """Read every partition to its end (read_committed) into ``history.final``."""
    reader = Reader(bootstrap, history, topic, final=True)
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive():
        reader.stop()
        raise AssertionError("the final read did not reach the end of every partition")
    if reader.error is not None:
        raise AssertionError("the final read failed") from reader.error


@dataclass(frozen=True)
class Cut:
    """One fault: cut off ``whom`` ("coordinator" of the transactional id, "leader" of ``partition``, or a broker
    id as text) for ``hold_s`` seconds after it lost its session; ``outbound``: it may still open connections."""

    whom: str
    outbound: bool = False
    partition: int = 0
    hold_s: float = 2.5


def create_topic(cluster: PartitionedCluster, topic: str) -> None:
    """``topic`` with replication factor 3 and min.insync.replicas 2, every partition led."""
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    admin = cluster.admin()  # kept alive until the result is in
    admin.create_topics([new])[topic].result(60)
    cluster.wait_for(
        lambda md: topic in md.topics and all(p.leader > 0 for p in md.topics[topic].partitions.values()), topic
    )


def coordinator_of(cluster: PartitionedCluster, transactional_id: str) -> int:
    """The broker leading the id's ``__transaction_state`` partition now."""
    md = cluster.wait_for(lambda md: TXN_STATE in md.topics, TXN_STATE)
    partitions = md.topics[TXN_STATE].partitions
    return partitions[partition_for_key(transactional_id, len(partitions))].leader


def target_of(cluster: PartitionedCluster, cut: Cut, topic: str, transactional_id: str) -> int:
    if cut.whom == "coordinator":
        return coordinator_of(cluster, transactional_id)
    if cut.whom == "leader":
        return cluster.metadata().topics[topic].partitions[cut.partition].leader
    return int(cut.whom)


def all_in_sync(cluster: PartitionedCluster, topic: str, timeout_s: float = 60.0) -> None:
    """Wait until every broker is registered and every partition of ``topic`` is led with a full ISR."""
    cluster.wait_for(
        lambda md: (
            len(md.brokers) == len(cluster.brokers)
            and all(len(p.isrs) == 3 and p.leader > 0 for p in md.topics[topic].partitions.values())
        ),
        "every replica back in sync",
        timeout_s=timeout_s,
    )


def settle(cluster: PartitionedCluster, transactional_id: str) -> None:
    """A new producer of the id completes whatever its predecessor left prepared or open."""
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id}).init_transactions(60)


def run_with_cuts(
    cluster: PartitionedCluster,
    cuts: list[Cut],
    *,
    topic: str = "jepsen",
    transactional_id: str = "jepsen-txn",
    rest_s: float = 1.5,
    seed: int = 0,
    log: Callable[[str], None] = lambda line: None,
) -> History:
    """Run the writers and a reader through ``cuts`` (each: isolate, wait until the other brokers see the target's
    session end, hold, heal, wait for full ISRs, rest), then settle the transactional id and read everything."""
    create_topic(cluster, topic)
    history = History()
    workers: list[_Worker] = [
        IdempotentWriter(cluster.bootstrap, history, topic),
        TransactionalWriter(cluster.bootstrap, history, topic, transactional_id, seed=seed),
        Reader(cluster.bootstrap, history, topic),
    ]
    for worker in workers:
        worker.start()
    try:
        time.sleep(rest_s)
        for cut in cuts:
            node = target_of(cluster, cut, topic, transactional_id)
            log(f"isolate {node} ({cut})")
            cluster.network.isolate(node, outbound=cut.outbound)
            other = next(n for n in cluster.brokers if n != node)
            cluster.wait_for(lambda md, node=node: node not in md.brokers, f"broker {node} fenced", via=other)
            time.sleep(cut.hold_s)
            cluster.network.heal(node)
            all_in_sync(cluster, topic)
            log(f"healed {node}: {history.summary()}")
            time.sleep(rest_s)
    finally:
        for worker in workers:
            worker.stop()
    settle(cluster, transactional_id)
    final_read(cluster.bootstrap, history, topic)
    return history
