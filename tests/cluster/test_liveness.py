"""A dead broker's session is ended early (``broker.cluster.liveness``): its followers see its connections break,
find its registered address refusing connections and revoke its lease, so its partitions move long before a
session timeout. A paused broker (SIGSTOP: its sockets still accept) keeps its session."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import NewTopic
from support.cluster import Cluster

#: Long enough that only the early end can explain a broker leaving within the tests' waits.
SESSION_TIMEOUT_MS = 60_000


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(3, settings={"broker.session.timeout.ms": SESSION_TIMEOUT_MS}) as running:
        yield running


def create(cluster: Cluster, name: str) -> int:
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[name].result(timeout=60)
    return cluster.wait_for(lambda md: name in md.topics, name).topics[name].partitions[0].leader


def test_a_killed_leader_leaves_the_cluster_before_its_session_would_end(cluster: Cluster) -> None:
    leader = create(cluster, "killed")
    killed = time.monotonic()
    cluster.brokers[leader].kill()
    cluster.wait_for(
        lambda md: leader not in md.brokers and md.topics["killed"].partitions[0].leader not in (leader, -1),
        f"broker {leader} gone and replaced",
        timeout_s=20,
    )
    assert time.monotonic() - killed < SESSION_TIMEOUT_MS / 1000 / 2


def test_a_paused_leader_keeps_its_session(cluster: Cluster) -> None:
    leader = create(cluster, "paused")
    other = next(b for b in cluster.brokers if b != leader)
    os.kill(cluster.brokers[leader].pid, signal.SIGSTOP)
    try:
        time.sleep(5)  # its followers' fetches time out or stall meanwhile; its listener still accepts
        metadata = cluster.metadata(via=other)
        assert leader in metadata.brokers
        assert metadata.topics["paused"].partitions[0].leader == leader
    finally:
        os.kill(cluster.brokers[leader].pid, signal.SIGCONT)
