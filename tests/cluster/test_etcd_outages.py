"""What a cluster does when etcd, or one broker's session with it, goes away: brokers keep serving the partitions
whose leadership did not change while etcd is restarted, and a broker whose session lapsed stops leading (its
partitions have new leaders) and joins again as a follower."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from support.cluster import SESSION_TIMEOUT_MS, Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        yield running


def create(cluster: Cluster, name: str, partitions: int) -> dict[int, int]:
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(timeout=60)
    metadata = cluster.wait_for(lambda md: name in md.topics, name)
    return {p: pm.leader for p, pm in metadata.topics[name].partitions.items()}


def produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, f"r{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0


def test_brokers_keep_serving_while_etcd_restarts() -> None:
    """An outage shorter than broker.session.timeout.ms (6 s here): no session is lost, nothing moves, and every
    partition keeps taking acks=all writes meanwhile. (Longer, every broker fences itself: the other test.)"""
    with Cluster(3, settings={"broker.session.timeout.ms": 6000}) as cluster:
        _keep_serving_through_restart(cluster)


def _keep_serving_through_restart(cluster: Cluster) -> None:
    leaders = create(cluster, "through-restart", 3)
    cluster.etcd.stop()
    stopped = time.monotonic()
    produce(cluster, "through-restart", 30)
    assert time.monotonic() - stopped < 6, "the writes must land within the outage for this test to mean anything"
    cluster.etcd.start()
    produce(cluster, "through-restart", 30)
    metadata = cluster.wait_for(lambda md: len(md.brokers) == 3, "three brokers after the restart")
    assert {p: pm.leader for p, pm in metadata.topics["through-restart"].partitions.items()} == leaders
    # Changes go through again: a topic is created after the restart.
    create(cluster, "after-restart", 3)


def test_a_broker_whose_session_lapsed_stops_leading_and_rejoins(cluster: Cluster) -> None:
    leaders = create(cluster, "fenced", 3)
    paused = leaders[0]
    pid = cluster.brokers[paused].pid
    os.kill(pid, signal.SIGSTOP)  # a long pause: no lease renewal
    try:
        cluster.wait_for(
            lambda md: (
                paused not in md.brokers
                and all(pm.leader not in (paused, -1) for pm in md.topics["fenced"].partitions.values())
            ),
            f"leadership moved off the paused broker {paused}",
            timeout_s=SESSION_TIMEOUT_MS / 1000 + 20,
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    # Back, it registers again and tells clients the new leaders, not itself.
    metadata = cluster.wait_for(lambda md: paused in md.brokers, f"broker {paused} registered again", via=paused)
    time.sleep(0.5)
    metadata = cluster.metadata(via=paused)
    assert all(pm.leader != paused for pm in metadata.topics["fenced"].partitions.values())
