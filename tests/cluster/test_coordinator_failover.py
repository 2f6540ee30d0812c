"""Coordinator failover on a three-broker cluster (stock confluent-kafka clients, real processes).

(a), (b): the broker coordinating a transactional id dies by SIGKILL at a fault point (``ONCELOG_FAULTS``, set on
that broker only) after the transaction's outcome is decided in ``__transaction_state``; the broker that takes over
the id's partition loads it and finishes the transaction as decided, on partitions led by every broker.
(c): an exactly-once consume-transform-produce copier (``support/copier.py``, send_offsets_to_transaction) loses
the broker that coordinates both its transactional id and its group mid-run; the output equals the input, once.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from oncelog.protocol.internal.java_hash import partition_for_key
from support.cluster import KAFKA_COMMIT_ORDER, Cluster
from support.committed import read_committed_values
from support.copier_harness import (
    COPIER,
    FINISH_DEADLINE_S,
    MAX_FINISH_RESTARTS,
    ChaosResult,
    CopierProcess,
    exactly_once_problems,
    produce_input,
)
from support.copier_harness import read_committed as read_output

TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 50
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 50
#: A copier that commits nothing for this long is considered hung (its idle exit takes a few seconds).
COPIER_STALL_S = 20.0
#: The broker started with the fault point: it coordinates the transactional id under test.
DOOMED = 1
TOPIC = "orders"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers, the first with ``ONCELOG_FAULTS`` = the test's parameter (a fault point, or a fault point and
    the brokers' settings)."""
    fault, settings = request.param if isinstance(request.param, tuple) else (request.param, None)
    running = Cluster(3, settings=settings)
    running.brokers[DOOMED].env = {"ONCELOG_FAULTS": fault}
    try:
        running.start()
        yield running
    finally:
        kill_all(running)
        running.close()


def kill_all(cluster: Cluster) -> None:
    """SIGKILL every broker before closing: the data is thrown away, and a controlled shutdown of the last broker
    waits ~10 s for leaderships that cannot move."""
    for broker in cluster.brokers.values():
        broker.kill()


def prepare(cluster: Cluster) -> str:
    """The data topic (three partitions led by three brokers) and ``__transaction_state``; returns a transactional
    id the doomed broker coordinates."""
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(60)
    md = cluster.wait_for(lambda md: TOPIC in md.topics, TOPIC)
    assert {p.leader for p in md.topics[TOPIC].partitions.values()} == {1, 2, 3}
    warmup = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warmup"})
    warmup.init_transactions(60)  # FindCoordinator creates __transaction_state
    leaders = internal_leaders(cluster, TXN_STATE, TXN_STATE_PARTITIONS)
    return next(
        tid
        for tid in (f"orders-writer-{i}" for i in range(1000))
        if leaders[partition_for_key(tid, TXN_STATE_PARTITIONS)] == DOOMED
    )


def read_committed(cluster: Cluster, expected: int, deadline_s: float = 60.0) -> list[bytes]:
    """Values a read_committed reader sees in every partition of TOPIC once it has ``expected`` of them and has
    reached each partition's end."""
    return read_committed_values(cluster.live_bootstrap(), TOPIC, range(3), lambda vs: len(vs) >= expected, deadline_s)


def end_transaction(producer: Producer, commit: bool) -> None:
    """Commit or abort; the coordinator may die under it (the test checks the outcome by reading)."""
    with contextlib.suppress(KafkaException):
        (producer.commit_transaction if commit else producer.abort_transaction)(60)


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


def transaction_begun(cluster: Cluster, transactional_id: str, prefix: str) -> tuple[Producer, list[bytes]]:
    """A producer of ``transactional_id`` with 30 records (``prefix``-N) sent across TOPIC's partitions in a
    transaction it has begun."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    values = [f"{prefix}-{i}".encode() for i in range(30)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % 3)
    return producer, values


@pytest.mark.parametrize(
    "cluster", ["txn.after_prepare", "txn.after_first_marker", "txn.before_complete"], indirect=True
)
def test_a_commit_decided_by_a_coordinator_killed_before_its_markers_is_finished_by_the_next(
    cluster: Cluster,
) -> None:
    transactional_id = prepare(cluster)
    producer, committed = transaction_begun(cluster, transactional_id, "committed")
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


@pytest.mark.parametrize("cluster", [("txn.after_first_marker", KAFKA_COMMIT_ORDER)], indirect=True)
def test_a_commit_answered_in_kafkas_order_is_finished_by_the_next_coordinator(cluster: Cluster) -> None:
    """``transaction.marker.wait.ms=0``: the commit returns once PrepareCommit is durable and replicated; the
    coordinator then dies writing the markers, and the broker that takes over the id writes them."""
    transactional_id = prepare(cluster)
    producer, committed = transaction_begun(cluster, transactional_id, "committed")
    producer.commit_transaction(60)  # answered before the markers, so before the fault point kills the coordinator
    assert cluster.brokers[DOOMED].wait_exit(60) != 0
    assert sorted(read_committed(cluster, len(committed))) == sorted(committed)
    after = transaction_after(cluster, transactional_id)
    assert sorted(read_committed(cluster, len(committed) + 3)) == sorted(committed + after)


@pytest.mark.parametrize("cluster", ["txn.after_first_marker"], indirect=True)
def test_b_an_abort_decided_by_a_killed_coordinator_leaves_nothing_visible(cluster: Cluster) -> None:
    transactional_id = prepare(cluster)
    producer, _aborted = transaction_begun(cluster, transactional_id, "aborted")
    assert producer.flush(30) == 0
    end_transaction(producer, commit=False)
    assert cluster.brokers[DOOMED].wait_exit(60) != 0  # killed after PrepareAbort and one marker
    # The next producer of the id is served by the new coordinator once it completed the abort; its records are
    # the only ones a read_committed reader sees (every partition's last stable offset moved past the abort).
    after = transaction_after(cluster, transactional_id)
    assert sorted(read_committed(cluster, len(after))) == sorted(after)


def internal_leaders(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> leader of an internal topic, once every partition has one."""
    md = cluster.wait_for(
        lambda md: (
            topic in md.topics
            and len(md.topics[topic].partitions) == partitions
            and all(p.leader > 0 for p in md.topics[topic].partitions.values())
        ),
        topic,
    )
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


@pytest.fixture
def plain_cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running
        kill_all(running)


def test_c_a_copier_loses_its_coordinators_broker_mid_run_and_copies_exactly_once(
    plain_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = plain_cluster
    admin = cluster.admin()
    for name in ("copy-in", "copy-out"):
        admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(60)
    cluster.wait_for(lambda md: "copy-in" in md.topics and "copy-out" in md.topics, "topics")
    records = 3000
    input_rows = produce_input(cluster.bootstrap, "copy-in", records)
    # FindCoordinator creates both internal topics; then pick ids both coordinated by one broker, the doomed one.
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warmup"}).init_transactions(60)
    warm = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "warmup"})
    warm.subscribe(["copy-in"])
    warm.poll(3)
    warm.close()
    txn_leaders = internal_leaders(cluster, TXN_STATE, TXN_STATE_PARTITIONS)
    group_leaders = internal_leaders(cluster, OFFSETS, OFFSETS_PARTITIONS)
    doomed = txn_leaders[partition_for_key("copier-txn", TXN_STATE_PARTITIONS)]
    group = next(
        g
        for g in (f"copier-group-{i}" for i in range(1000))
        if group_leaders[partition_for_key(g, OFFSETS_PARTITIONS)] == doomed
    )
    starts = 0

    def start_copier() -> CopierProcess:
        nonlocal starts
        starts += 1
        argv = [sys.executable, str(COPIER), "--client", "confluent", "--bootstrap", cluster.bootstrap]
        argv += ["--group", group, "--input", "copy-in", "--output", "copy-out", "--transactional-id", "copier-txn"]
        argv += ["--instance-id", "copier-1", "--batch", "100", "--idle-s", "3"]
        return CopierProcess(argv, tmp_path / f"copier-{starts}.log")

    copiers: list[CopierProcess] = []
    try:
        check_copy(cluster, doomed, start_copier, copiers, tmp_path)
    finally:
        for running in copiers:
            if running.poll() is None:
                running.proc.send_signal(signal.SIGUSR1)  # its threads' stacks go to its log
                time.sleep(0.5)
                running.kill()
    output_rows = read_output(cluster.live_bootstrap(), "copy-out", deadline_s=60)
    assert exactly_once_problems(ChaosResult(records, input_rows, output_rows)) == []


def check_copy(
    cluster: Cluster,
    doomed: int,
    start: Callable[[], CopierProcess],
    copiers: list[CopierProcess],
    tmp_path: Path,
) -> None:
    """Run copiers (recorded in ``copiers``) until the input is copied, killing ``doomed`` after five commits."""
    copier = start()
    copiers.append(copier)
    deadline = time.monotonic() + 60
    while copier.commits() < 5 and copier.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert copier.commits() >= 5, (tmp_path / "copier-1.log").read_text()[-3000:]
    cluster.brokers[doomed].kill()  # the coordinator of the copier's transactional id and of its group
    exits: list[int | None] = []
    while (code := finish(copier)) != 0:
        # Fenced or fatal while the coordinators moved, or hung (None): a new copier resumes from the committed
        # offsets, as after any copier crash.
        exits.append(code)
        assert len(exits) <= MAX_FINISH_RESTARTS, exits
        copier = start()
        copiers.append(copier)
    last = start()  # finds nothing left to copy
    copiers.append(last)
    assert last.wait(FINISH_DEADLINE_S) == 0
    assert "caught up after 0 records" in last.lines, last.lines[-5:]


def finish(copier: CopierProcess) -> int | None:
    """The copier's exit code once it exits; None after SIGKILLing it when it made no progress for
    COPIER_STALL_S. librdkafka (2.x) can leave send_offsets_to_transaction blocked past its timeout when the
    group coordinator's broker dies under its TxnOffsetCommit (the request waits for that broker to come back);
    the test then treats the copier as crashed."""
    progress, since = copier.commits(), time.monotonic()
    while copier.poll() is None:
        if copier.commits() != progress:
            progress, since = copier.commits(), time.monotonic()
        elif time.monotonic() - since > COPIER_STALL_S:
            copier.proc.send_signal(signal.SIGUSR1)  # its threads' stacks go to its log
            time.sleep(0.5)
            copier.kill()
            return None
        time.sleep(0.1)
    return copier.wait(5)
