"""The Apache Kafka peer fixture (``support.kafka_peer``) on its failure path; its success path is the test run's
shared ``kafka_peer`` (``tests/conftest.py``: ``interop/test_differential.py`` and the bench smoke test's P1 against
Kafka) and by hand under the Java client tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from support.kafka_peer import KafkaPeer, KafkaStartError, cluster_id


def test_a_setting_kafka_refuses_raises_with_its_message_and_leaves_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*"))
    peer = KafkaPeer(fsync=True, settings={"node.id": "not-a-number"})
    with pytest.raises(KafkaStartError, match="Invalid value not-a-number"):
        peer.start()
    assert peer.proc is None
    assert set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*")) == before


def test_cluster_ids_never_start_with_a_dash() -> None:
    """``kafka-storage format -t <id>`` reads an id starting with '-' as an option and fails; Kafka's own
    Uuid.randomUuid never hands one out (one in 64 would start so: 2,000 draws all miss it by chance once in 10^13)."""
    ids = [cluster_id() for _ in range(2000)]
    assert not [found for found in ids if found.startswith("-")]
    assert len(set(ids)) == len(ids) and all(len(found) == 22 for found in ids)
