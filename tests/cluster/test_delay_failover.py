"""The embedded DelayService on a three-broker cluster: each broker's service forwards the delay partitions that
broker leads, and when the leader of a delay partition dies by SIGKILL while its records are pending and due, the
service beside the new leader takes the partition over (fencing the old one's transactional id): every record is
delivered exactly once, never before its due time.

Speed-up: the brokers run with the short levels ``1s,4s`` (``delay.levels``), three partitions per level.
The records go to ``__delay-4s`` only; the first ones to move on to ``__delay-1s`` do so after the kill. That topic
used to be created only then, and creating it needs three live brokers (the delay topics' replication factor): the
creation failed, each broker's Metadata handler dropped the connection (it now answers INVALID_REPLICATION_FACTOR,
``test_membership.py``), and the forward retried its metadata for request.timeout.ms (30 s) before the round failed,
so the records arrived ~30 s late. The services now have every
level created as soon as one is used, and move records only to existing levels: the test checks that ``__delay-1s``
exists before the kill and that no record arrives anywhere near that late.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic
from support.cluster import Cluster

LEVELS = "1s,4s"
LEVEL_TOPIC = "__delay-4s"
TARGET = "delayed-out"
PARTITIONS = 3
RECORDS = 300
#: Due times spread over this window after producing: the kill falls inside it.
SPREAD_MS = (1500, 7000)
KILL_AFTER_S = 3.0
DEADLINE_S = 60.0
#: The latest any record may arrive after its due time: far above a takeover (a few seconds under load), far below
#: the 30 s of a forward that waits for a level topic's creation.
MAX_LATENESS_MS = 20_000


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    running = Cluster(
        3,
        settings={
            "delay.levels": LEVELS,
            "delay.topic.num.partitions": PARTITIONS,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    try:
        running.start()
        yield running
    finally:
        for broker in running.brokers.values():
            broker.kill()  # the data is thrown away; a controlled shutdown would wait for leaderships
        running.close()


def delayed(due_ms: int, value: bytes, partition: int) -> dict:
    return {
        "topic": LEVEL_TOPIC,
        "value": value,
        "key": value,
        "partition": partition,
        "headers": [("oncelog-deliver-at-ms", str(due_ms).encode()), ("oncelog-delay-target", TARGET.encode())],
    }


def test_a_delay_partitions_new_leader_takes_over_exactly_once(cluster: Cluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TARGET, num_partitions=PARTITIONS, replication_factor=3)])[TARGET].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "delay-failover-check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        # Warm-up: the first use creates the level topics; one record per partition shows every service serving.
        warm_due = now_ms() + 500
        for partition in range(PARTITIONS):
            producer.produce(**delayed(warm_due, b"warm-%d" % partition, partition))
        assert producer.flush(60) == 0
        md = cluster.wait_for(
            lambda md: (
                LEVEL_TOPIC in md.topics and all(p.leader > 0 for p in md.topics[LEVEL_TOPIC].partitions.values())
            ),
            LEVEL_TOPIC,
        )
        leaders = {p.id: p.leader for p in md.topics[LEVEL_TOPIC].partitions.values()}
        consumer.subscribe([TARGET])
        received: list[tuple[bytes, int]] = []

        def poll_until(done) -> None:
            deadline = time.monotonic() + DEADLINE_S
            while not done() and time.monotonic() < deadline:
                for message in consumer.consume(500, timeout=0.2):
                    if message.error() is None:
                        received.append((message.value(), now_ms()))

        poll_until(lambda: sum(v.startswith(b"warm-") for v, _ in received) >= PARTITIONS)
        assert sorted(v for v, _ in received) == [b"warm-%d" % p for p in range(PARTITIONS)]

        start = now_ms()
        dues = {}
        for i in range(RECORDS):
            due = start + SPREAD_MS[0] + (SPREAD_MS[1] - SPREAD_MS[0]) * i // RECORDS
            dues[b"r%d" % i] = due
            producer.produce(**delayed(due, b"r%d" % i, i % PARTITIONS))
        assert producer.flush(30) == 0

        kill_at = time.monotonic() + KILL_AFTER_S
        poll_until(lambda: time.monotonic() >= kill_at)
        # Every level exists before any record moves to a second one (the first moves come ~1 s after the kill).
        assert "__delay-1s" in cluster.metadata().topics, "every level is created at the first use of one"
        victim = leaders[0]
        delivered = {value for value, _ in received}
        # Records of the victim's partition 0 still pending: only a takeover delivers them.
        pending = [b"r%d" % i for i in range(0, RECORDS, PARTITIONS) if b"r%d" % i not in delivered]
        assert pending, "every record was delivered before the kill: the test proves nothing"
        cluster.brokers[victim].kill()

        poll_until(lambda: sum(not v.startswith(b"warm-") for v, _ in received) >= RECORDS)
        settle = time.monotonic() + 2.0
        poll_until(lambda: time.monotonic() >= settle)  # duplicates would arrive now
        got = [(v, at) for v, at in received if not v.startswith(b"warm-")]
        counts = Counter(v for v, _ in got)
        assert {v: n for v, n in counts.items() if n > 1} == {}
        assert sorted(counts) == sorted(dues), f"missing: {sorted(set(dues) - set(counts))[:10]}"
        early = [(v, dues[v] - at) for v, at in got if at < dues[v]]
        assert early == []
        late = max(at - dues[v] for v, at in got)
        assert late < MAX_LATENESS_MS
    finally:
        consumer.close()
