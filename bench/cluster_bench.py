"""Cluster benchmarks (C1-C5 of ``bench/run.py``) on etcd and three broker processes on loopback, driven by
confluent-kafka (librdkafka):

- C1: acks=all throughput of a topic with replication factor 3 against one with factor 1, same cluster, same
  client, alternating rounds (median of each) after ``WARMUP_S`` of uncounted ones;
- C2: failover time: from a leader's SIGKILL until an acks=all idempotent producer that keeps sending gets its next
  acknowledgement (from the new leader), over several kills;
- C3: produce pause during a controlled shutdown (SIGTERM of the leader): the longest gap between two consecutive
  acknowledgements while it moves its leaderships away and stops;
- C4: transaction coordinator failover: from the SIGKILL of the broker coordinating a transactional producer's id
  until that producer (committing one small transaction after another) commits a transaction begun after the kill;
- C5: transactional throughput (a commit every 100 ms, as P3) into a topic with replication factor 3 against one
  with factor 1, alternating rounds (median of each) after ``WARMUP_S`` of uncounted ones.

Every broker fsyncs before acknowledging (oncelog's default), followers too.

C1 and C5 also run against Apache Kafka's own three-node KRaft cluster (``support.kafka_cluster.KafkaCluster``, every
node fsyncing each append, leaders and followers: ``log.flush.interval.messages=1``) with the same client code, topic
configs, record counts and rounds, when ``bench/run.py`` runs Kafka (not ``--no-kafka``): its ratio is the peer's
figure beside oncelog's. Each round also records CPU microseconds per record of the servers (the brokers summed; and
etcd for oncelog, whose role Kafka's controllers play inside its broker processes) and of this process (the client:
the Python loop and librdkafka's threads), so that a ratio can be read against where the CPU went. The two clusters
run one after the other, oncelog's first, never at once: on a two-core machine the rounds are CPU-bound, and an idle
cluster's background work (a fresh JVM's compiler, KRaft's fetches and heartbeats) would be charged to the other's
rounds; each ratio comes from alternating rounds within one cluster, so drift between the two blocks moves their
rec/s more than their ratios.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic
from oncelog.protocol.internal.java_hash import partition_for_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.cluster import KAFKA_COMMIT_ORDER, Cluster
from support.kafka_cluster import KafkaCluster

VALUE = b"x" * 100
#: One record every this many seconds while C2 and C3 watch for the pause.
SEND_INTERVAL_S = 0.002
#: C5 commits a transaction this often (P3's interval).
TXN_COMMIT_INTERVAL_S = 0.100
TXN_STATE = "__transaction_state"
#: ``transaction.state.log.num.partitions``
TXN_STATE_PARTITIONS = 50


class RoundCluster(Protocol):
    """What C1 and C5 need of a cluster: oncelog's ``Cluster`` and Kafka's ``KafkaCluster`` both serve."""

    @property
    def bootstrap(self) -> str: ...

    def admin(self) -> AdminClient: ...

    def wait_for(
        self, condition: Callable[[ClusterMetadata], bool], what: str, timeout_s: float = 30.0
    ) -> ClusterMetadata: ...

    def cpu_seconds(self) -> dict[str, float]: ...


#: C1 and C5 time rounds only after alternating uncounted ones for this long, on either cluster: a fresh JVM compiles
#: its hot paths under load for seconds (Kafka's first C1 round of 50,000 records ran at 40% of the rate of its third;
#: after 10 s of warm-up its C5 rounds still sped up by a third), and the first transactional round also creates
#: ``__transaction_state`` (50 partitions at factor 3).
WARMUP_S = 20.0
#: The part of the CPU spent by this process (the client) in a round's ``cpu_us_per_record``.
CLIENT = "client"


@dataclass
class ThroughputResult:
    records: int
    #: "oncelog" or "Kafka <version>"
    system: str = "oncelog"
    rf1_records_per_s: list[float] = field(default_factory=list)
    rf3_records_per_s: list[float] = field(default_factory=list)
    #: Per round, CPU microseconds per record of each part: "brokers" (summed), "etcd" (oncelog's), "client" (this
    #: process: from the producer's creation to its last acknowledgement or commit).
    rf1_cpu_us_per_record: list[dict[str, float]] = field(default_factory=list)
    rf3_cpu_us_per_record: list[dict[str, float]] = field(default_factory=list)
    #: The uncounted rounds first (factor 1, factor 3, ...), records/s.
    warmup_records_per_s: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.rf3_records_per_s) / statistics.median(self.rf1_records_per_s)

    @property
    def rf1(self) -> float:
        """Median records/s at replication factor 1."""
        return statistics.median(self.rf1_records_per_s)

    @property
    def rf3(self) -> float:
        """Median records/s at replication factor 3."""
        return statistics.median(self.rf3_records_per_s)

    def cpu_us(self, factor: int, part: str) -> float:
        """Median over the rounds of ``part``'s CPU microseconds per record at replication ``factor`` (1 or 3)."""
        rounds = self.rf3_cpu_us_per_record if factor == 3 else self.rf1_cpu_us_per_record
        return statistics.median(cpu[part] for cpu in rounds)

    def summary(self) -> dict[str, object]:
        """Every field and the ratio, for the JSON details."""
        return {**asdict(self), "ratio": self.ratio}


@dataclass
class PauseResult:
    """Seconds without an acknowledgement, one per trial."""

    seconds: list[float] = field(default_factory=list)
    session_timeout_ms: int = 0
    #: C2: seconds until Metadata (asked of a surviving broker every 20 ms) names the new leader: the cluster's share
    #: of the failover; the rest is the client finding it (librdkafka backs its Metadata refreshes off up to
    #: ``retry.backoff.max.ms``, 1000).
    leader_moved_seconds: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def _create(cluster: RoundCluster, name: str, partitions: int, factor: int) -> None:
    admin = cluster.admin()
    topic = NewTopic(name, num_partitions=partitions, replication_factor=factor, config={"min.insync.replicas": "1"})
    admin.create_topics([topic])[name].result(timeout=60)
    cluster.wait_for(
        lambda md: name in md.topics and all(p.leader > 0 for p in md.topics[name].partitions.values()), name
    )


def _led(topic: object) -> bool:
    return all(p.leader > 0 for p in topic.partitions.values())  # type: ignore[attr-defined]


def _send(producer: Producer, topic: str, partition: int) -> None:
    """Produce one record, serving delivery reports while the local queue is full."""
    while True:
        try:
            producer.produce(topic, VALUE, partition=partition)
            return
        except BufferError:
            producer.poll(0.01)


def _produce_timed(bootstrap: str, topic: str, records: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    started = time.perf_counter()
    for i in range(records):
        _send(producer, topic, i % 3)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - started)


def _timed_round(
    cluster: RoundCluster, timed: Callable[[str, str, int], float], topic: str, records: int
) -> tuple[float, dict[str, float]]:
    """One round: records/s and CPU microseconds per record of each server part and of this process (``CLIENT``)."""
    servers, client = cluster.cpu_seconds(), time.process_time()
    rate = timed(cluster.bootstrap, topic, records)
    client = time.process_time() - client
    cpu = {part: (used - servers[part]) * 1e6 / records for part, used in cluster.cpu_seconds().items()}
    return rate, {**cpu, CLIENT: client * 1e6 / records}


def _rf3_vs_rf1(
    records: int,
    rounds: int,
    timed: Callable[[str, str, int], float],
    prefix: str,
    cluster: Callable[[], AbstractContextManager[RoundCluster]],
    system: str,
) -> ThroughputResult:
    """``timed(bootstrap, topic, records)`` (records/s) alternating between a factor-1 and a factor-3 topic, after
    uncounted alternating rounds for at least ``WARMUP_S``."""
    result = ThroughputResult(records, system)
    with cluster() as brokers:
        _create(brokers, f"{prefix}rf1", 3, 1)
        _create(brokers, f"{prefix}rf3", 3, 3)
        warm_until = time.monotonic() + WARMUP_S
        while time.monotonic() < warm_until:
            for topic in (f"{prefix}rf1", f"{prefix}rf3"):
                result.warmup_records_per_s.append(timed(brokers.bootstrap, topic, records))
        for _ in range(rounds):
            for topic, rates, cpus in (
                (f"{prefix}rf1", result.rf1_records_per_s, result.rf1_cpu_us_per_record),
                (f"{prefix}rf3", result.rf3_records_per_s, result.rf3_cpu_us_per_record),
            ):
                rate, cpu = _timed_round(brokers, timed, topic, records)
                rates.append(rate)
                cpus.append(cpu)
    return result


def _oncelog_cluster(settings: dict[str, str | int] | None = None) -> Cluster:
    return Cluster(3, settings=settings)


def _kafka_cluster() -> KafkaCluster:
    return KafkaCluster(3, fsync=True)


def throughput(records: int, rounds: int, *, kafka: str | None = None) -> ThroughputResult:
    """C1: acks=all records/s, replication factor 3 vs 1; of Apache Kafka's cluster when ``kafka`` (its name for
    reports, e.g. "Kafka 4.1.1"), else of oncelog's."""
    if kafka is not None:
        return _rf3_vs_rf1(records, rounds, _produce_timed, "", _kafka_cluster, kafka)
    return _rf3_vs_rf1(records, rounds, _produce_timed, "", _oncelog_cluster, "oncelog")


def _wait_growth(items: list[tuple[float, float]], count: int, timeout_s: float, failure: str) -> None:
    """Wait until another thread has appended ``count`` more items (AssertionError ``failure`` after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    start = len(items)
    while len(items) < start + count:
        assert time.monotonic() < deadline, failure
        time.sleep(0.01)


class _Pacer:
    """Sends one acks=all idempotent record every SEND_INTERVAL_S and keeps every acknowledgement's time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        #: (sent, acknowledged) monotonic times of every acknowledged record.
        self.acked: list[tuple[float, float]] = []
        self.failed = 0
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000}
        )
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()

            def delivered(error: object, _message: object, sent: float = sent) -> None:
                if error is None:
                    self.acked.append((sent, time.monotonic()))
                else:
                    self.failed += 1

            self._producer.produce(self._topic, VALUE, partition=0, on_delivery=delivered)
            self._producer.poll(SEND_INTERVAL_S)

    def __enter__(self) -> _Pacer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(60)

    def wait_acks(self, count: int, timeout_s: float = 60) -> None:
        _wait_growth(self.acked, count, timeout_s, "no acknowledgements")


def _leader(cluster: Cluster, topic: str) -> int:
    return cluster.metadata().topics[topic].partitions[0].leader


def _leader_via(cluster: Cluster, topic: str, broker: int) -> int:
    return cluster.metadata(via=broker).topics[topic].partitions[0].leader


def _wait_in_sync(cluster: Cluster, topic: str, broker: int) -> None:
    cluster.wait_for(lambda md: broker in md.topics[topic].partitions[0].isrs, f"broker {broker} in sync", 60)


def failover(trials: int, session_timeout_ms: int) -> PauseResult:
    """C2: seconds from a leader's SIGKILL to the producer's next acknowledgement."""
    result = PauseResult(session_timeout_ms=session_timeout_ms)
    with Cluster(3, settings={"broker.session.timeout.ms": session_timeout_ms}) as cluster:
        topic = f"failover-{uuid.uuid4().hex[:6]}"
        _create(cluster, topic, 1, 3)
        with _Pacer(cluster.bootstrap, topic) as pacer:
            for _ in range(trials):
                pacer.wait_acks(200)
                victim = _leader(cluster, topic)
                killed = time.monotonic()
                cluster.brokers[victim].kill()
                survivor = next(b for b in cluster.brokers if b != victim)
                while _leader_via(cluster, topic, survivor) in (victim, -1):
                    time.sleep(0.02)
                result.leader_moved_seconds.append(time.monotonic() - killed)
                pacer.wait_acks(1, timeout_s=120)
                # The first acknowledgement of a record sent after the kill: the new leader's (an acknowledgement of an
                # earlier record may still be the old leader's, read late).
                pacer.wait_acks(1, timeout_s=120)
                while not any(sent > killed for sent, _ in pacer.acked):
                    time.sleep(0.01)
                result.seconds.append(min(acked for sent, acked in pacer.acked if sent > killed) - killed)
                cluster.brokers[victim].start()
                _wait_in_sync(cluster, topic, victim)
    return result


def controlled_shutdown_pause(trials: int) -> PauseResult:
    """C3: the longest gap between acknowledgements while the leader stops on SIGTERM."""
    result = PauseResult()
    with Cluster(3) as cluster:
        topic = f"handover-{uuid.uuid4().hex[:6]}"
        _create(cluster, topic, 1, 3)
        with _Pacer(cluster.bootstrap, topic) as pacer:
            for _ in range(trials):
                pacer.wait_acks(200)
                leaving = _leader(cluster, topic)
                stopped = time.monotonic()
                cluster.brokers[leaving].stop()
                pacer.wait_acks(200)
                acks = [stopped, *sorted(acked for _, acked in pacer.acked if acked > stopped)]
                result.seconds.append(max(b - a for a, b in itertools.pairwise(acks)))
                cluster.brokers[leaving].start()
                _wait_in_sync(cluster, topic, leaving)
    return result


def _transactional_timed(bootstrap: str, topic: str, records: int) -> float:
    """Records/s sent in transactions committed every TXN_COMMIT_INTERVAL_S, first send to last commit."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"c5-{uuid.uuid4().hex}", "linger.ms": 5})
    producer.init_transactions(60)
    started = time.perf_counter()
    producer.begin_transaction()
    txn_started = started
    for i in range(records):
        _send(producer, topic, i % 3)
        producer.poll(0)
        if time.perf_counter() - txn_started >= TXN_COMMIT_INTERVAL_S:
            producer.commit_transaction(120)
            producer.begin_transaction()
            txn_started = time.perf_counter()
    producer.commit_transaction(120)
    return records / (time.perf_counter() - started)


def transactional_throughput(
    records: int, rounds: int, *, kafka: str | None = None, kafka_order: bool = False
) -> ThroughputResult:
    """C5: transactional records/s, replication factor 3 vs 1 (``__transaction_state`` has factor 3 in both); of
    Apache Kafka's cluster when ``kafka`` (its name for reports), else of oncelog's, with Kafka's commit order
    (``KAFKA_COMMIT_ORDER``) when ``kafka_order``."""
    if kafka is not None:
        return _rf3_vs_rf1(records, rounds, _transactional_timed, "txn-", _kafka_cluster, kafka)
    if kafka_order:
        system = "oncelog, " + ", ".join(f"{k}={v}" for k, v in KAFKA_COMMIT_ORDER.items())
        return _rf3_vs_rf1(
            records, rounds, _transactional_timed, "txn-", lambda: _oncelog_cluster(KAFKA_COMMIT_ORDER), system
        )
    return _rf3_vs_rf1(records, rounds, _transactional_timed, "txn-", _oncelog_cluster, "oncelog")


@dataclass
class CoordinatorFailoverResult:
    """C4: per kill, seconds until a transaction begun after it committed; and what the producer went through."""

    seconds: list[float] = field(default_factory=list)
    #: Per kill: commit_transaction calls that failed retriably (retried), transactions aborted, producers replaced.
    retried: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


class _Committer:
    """One transactional producer committing a one-record transaction after another (across the topic's partitions)
    in a thread; keeps (began, committed) monotonic times of every commit and counts what went wrong."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        self.commits: list[tuple[float, float]] = []
        self.retried = self.aborted = self.replaced = 0
        self._bootstrap, self._topic, self._id = bootstrap, topic, transactional_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _producer(self) -> Producer:
        producer = Producer(
            {"bootstrap.servers": self._bootstrap, "transactional.id": self._id, "transaction.timeout.ms": 30000}
        )
        while True:
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException as exc:
                if exc.args[0].fatal():
                    producer = Producer({"bootstrap.servers": self._bootstrap, "transactional.id": self._id})
                time.sleep(0.05)

    def _run(self) -> None:
        producer = self._producer()
        for i in itertools.count():
            if self._stop.is_set():
                return
            began = time.monotonic()
            try:
                producer.begin_transaction()
                producer.produce(self._topic, VALUE, partition=i % 3)
                while True:
                    try:
                        producer.commit_transaction(30)
                        break
                    except KafkaException as exc:
                        if not exc.args[0].retriable():
                            raise
                        self.retried += 1
                self.commits.append((began, time.monotonic()))
            except KafkaException as exc:
                if exc.args[0].txn_requires_abort():
                    self.aborted += 1
                    try:
                        producer.abort_transaction(30)
                        continue
                    except KafkaException:
                        pass
                self.replaced += 1
                producer = self._producer()

    def __enter__(self) -> _Committer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)

    def wait_commits(self, count: int, timeout_s: float = 120) -> None:
        _wait_growth(self.commits, count, timeout_s, "no commits")


def _coordinator(cluster: Cluster, transactional_id: str) -> int:
    md = cluster.wait_for(
        lambda md: (
            TXN_STATE in md.topics
            and len(md.topics[TXN_STATE].partitions) == TXN_STATE_PARTITIONS
            and all(p.leader > 0 for p in md.topics[TXN_STATE].partitions.values())
        ),
        "every __transaction_state partition led",
        60,
    )
    return md.topics[TXN_STATE].partitions[partition_for_key(transactional_id, TXN_STATE_PARTITIONS)].leader


def coordinator_failover(trials: int) -> CoordinatorFailoverResult:
    """C4: seconds from the SIGKILL of a transactional id's coordinator until its producer commits a transaction
    begun after the kill."""
    result = CoordinatorFailoverResult()
    with Cluster(3) as cluster:
        topic = f"txn-failover-{uuid.uuid4().hex[:6]}"
        _create(cluster, topic, 3, 3)
        transactional_id = f"c4-{uuid.uuid4().hex[:6]}"
        with _Committer(cluster.bootstrap, topic, transactional_id) as committer:
            for _ in range(trials):
                committer.wait_commits(20)
                victim = _coordinator(cluster, transactional_id)
                retried, aborted, replaced = committer.retried, committer.aborted, committer.replaced
                killed = time.monotonic()
                cluster.brokers[victim].kill()
                while not any(began > killed for began, _ in committer.commits):
                    time.sleep(0.01)
                result.seconds.append(min(done for began, done in committer.commits if began > killed) - killed)
                result.retried.append(committer.retried - retried)
                result.aborted.append(committer.aborted - aborted)
                result.replaced.append(committer.replaced - replaced)
                cluster.brokers[victim].start()
                cluster.wait_for(
                    lambda md, victim=victim: (
                        victim in md.brokers and all(victim in p.isrs for p in md.topics[topic].partitions.values())
                    ),
                    f"broker {victim} back in sync",
                    60,
                )
    return result


if __name__ == "__main__":
    c1 = throughput(100_000, 3)
    print(f"C1 rf3/rf1 {c1.ratio:.3f} ({c1})")
    for timeout_ms in (2000, 6000):  # oncelog's default, and a longer one
        c2 = failover(3, timeout_ms)
        print(f"C2 failover p50 {c2.p50:.2f} s worst {c2.worst:.2f} s (session {timeout_ms} ms): {c2.seconds}")
        print(f"   new leader in Metadata after {c2.leader_moved_seconds}")
    c3 = controlled_shutdown_pause(3)
    print(f"C3 pause p50 {c3.p50:.3f} s worst {c3.worst:.3f} s: {c3.seconds}")
    c4 = coordinator_failover(5)
    print(f"C4 coordinator failover p50 {c4.p50:.2f} s worst {c4.worst:.2f} s: {c4}")
    c5 = transactional_throughput(50_000, 3)
    print(f"C5 transactional rf3/rf1 {c5.ratio:.3f} ({c5})")
