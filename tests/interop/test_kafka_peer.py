"""The Apache Kafka peer fixture (``support.kafka_peer``) on its failure path; its success path runs in
``tests/bench/test_bench_smoke.py`` (P1 against Kafka) and by hand under the Java client tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from support.kafka_peer import KafkaPeer, KafkaStartError


def test_a_setting_kafka_refuses_raises_with_its_message_and_leaves_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*"))
    peer = KafkaPeer(fsync=True, settings={"node.id": "not-a-number"})
    with pytest.raises(KafkaStartError, match="Invalid value not-a-number"):
        peer.start()
    assert peer.proc is None
    assert set(Path(tempfile.gettempdir()).glob("oncelog-kafka-peer-*")) == before
