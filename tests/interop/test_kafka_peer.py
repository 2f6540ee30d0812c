"""The Apache Kafka peer fixture (``support.kafka_peer``) on its failure path; its success path is the test run's
shared ``kafka_peer`` (``tests/conftest.py``: ``interop/test_differential.py`` and the bench smoke test's P1 against
Kafka) and by hand under the Java client tests. ``support.kafka_cluster``'s properties too; the cluster itself starts
only in ``bench/run.py`` (C1, C5), never in CI."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from support.kafka_cluster import KafkaCluster
from support.kafka_peer import KafkaPeer, KafkaStartError, cluster_id


def test_a_setting_kafka_refuses_raises_with_its_message_and_leaves_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*"))
    peer = KafkaPeer(fsync=True, settings={"node.id": "not-a-number"})
    with pytest.raises(KafkaStartError, match="Invalid value not-a-number"):
        peer.start()
    assert peer.proc is None
    assert set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*")) == before


def test_a_cluster_kafka_refuses_raises_and_leaves_nothing() -> None:
    """A setting every node refuses fails ``KafkaCluster.start`` at the first node's format: no JVM left, no dir of
    any node (the others were allocated already)."""
    before = set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*"))
    cluster = KafkaCluster(3, settings={"node.id": "not-a-number"})
    with pytest.raises(KafkaStartError, match="Invalid value not-a-number"):
        cluster.start()
    assert all(node.proc is None for node in cluster.nodes.values())
    assert set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*")) == before


def test_cluster_ids_never_start_with_a_dash() -> None:
    """``kafka-storage format -t <id>`` reads an id starting with '-' as an option and fails; Kafka's own
    Uuid.randomUuid never hands one out (one in 64 would start so: 2,000 draws all miss it by chance once in 10^13)."""
    ids = [cluster_id() for _ in range(2000)]
    assert not [found for found in ids if found.startswith("-")]
    assert len(set(ids)) == len(ids) and all(len(found) == 22 for found in ids)


def test_cluster_nodes_share_one_quorum_with_their_own_ids_and_replicated_internal_topics() -> None:
    """``KafkaCluster``'s properties, without a JVM: every node lists every node's controller port as a voter, has its
    own node.id and ports, fsyncs each append, and gives the internal topics factor 3 (``__transaction_state``'s
    min.isr 2); ``stop()`` removes the allocated dirs."""
    before = set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*"))
    cluster = KafkaCluster(3)
    try:
        for node in cluster.nodes.values():
            node.allocate()
        props = {
            node_id: dict(line.split("=", 1) for line in cluster.properties(node_id).splitlines())
            for node_id in (1, 2, 3)
        }
    finally:
        cluster.stop()
    assert set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*")) == before
    voters = {props[n]["controller.quorum.voters"] for n in props}
    assert len(voters) == 1
    assert sorted(voter.split("@")[0] for voter in voters.pop().split(",")) == ["1", "2", "3"]
    assert [props[n]["node.id"] for n in (1, 2, 3)] == ["1", "2", "3"]
    assert len({props[n]["listeners"] for n in props}) == 3
    for node in props.values():
        assert node["process.roles"] == "broker,controller"
        assert node["log.flush.interval.messages"] == "1"
        assert node["offsets.topic.replication.factor"] == "3"
        assert node["transaction.state.log.replication.factor"] == "3"
        assert node["transaction.state.log.min.isr"] == "2"
        assert "transaction.state.log.num.partitions" not in node  # Kafka's default, 50, as oncelog's cluster
