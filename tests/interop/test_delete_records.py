"""Interop: DeleteRecords from confluent-kafka (``AdminClient.delete_records``) and kafka-python
(``KafkaAdminClient.delete_records``) against the broker under test; kafkajs's ``deleteTopicRecords`` is in
test_kafkajs.py. After a deletion ListOffsets EARLIEST answers the new start, a group consumer with
auto.offset.reset=earliest reads only the records from there on, and the start survives a SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.broker import BrokerProcess
from support.confluent_io import produce_all
from support.dataset import Delivered, make_records
from support.topics import create_topic_confluent

PARTITIONS = 2
N_RECORDS = 300
DEADLINE_S = 30.0


def _produce(bootstrap: str, topic: str, seed: int) -> list[Delivered]:
    return produce_all(bootstrap, topic, make_records(N_RECORDS, seed=seed))


def _ends(delivered: list[Delivered]) -> dict[int, int]:
    return {p: 1 + max(d.offset for d in delivered if d.partition == p) for p in range(PARTITIONS)}


def _delete(bootstrap: str, topic: str, offsets: dict[int, int]) -> dict[int, int]:
    """confluent-kafka's delete_records; each partition's low watermark (raises KafkaException on an error)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()], operation_timeout=10)
    return {tp.partition: future.result(timeout=15).low_watermark for tp, future in futures.items()}


def _earliest(bootstrap: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest() for p in range(PARTITIONS)})
    return {tp.partition: future.result(timeout=15).offset for tp, future in futures.items()}


def _group_reads(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int]]:
    """(partition, offset) of every record a new group member with auto.offset.reset=earliest reads, once
    ``expected`` arrived and nothing more came for a second."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen: list[tuple[int, int]] = []
        end = time.monotonic() + DEADLINE_S
        quiet_since = None
        while quiet_since is None or time.monotonic() - quiet_since < 1.0:
            assert time.monotonic() < end, f"read {len(seen)}/{expected} records in {DEADLINE_S}s"
            messages = consumer.consume(num_messages=500, timeout=0.2)
            for m in messages:
                assert m.error() is None, m.error()
                seen.append((m.partition(), m.offset()))
            if len(seen) >= expected and not messages:
                quiet_since = quiet_since or time.monotonic()
            elif messages:
                quiet_since = None
        return seen
    finally:
        consumer.close()


def _kept(delivered: list[Delivered], starts: dict[int, int]) -> list[tuple[int, int]]:
    return sorted((d.partition, d.offset) for d in delivered if d.offset >= starts[d.partition])


def test_confluent_delete_records_then_consumers_start_after_them(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic("ck-delete-records", PARTITIONS)
    delivered = _produce(bootstrap, topic, seed=41)
    ends = _ends(delivered)
    start = ends[0] // 2
    # OFFSET_END (-1) asks for everything below the high watermark.
    assert _delete(bootstrap, topic, {0: start, 1: OFFSET_END}) == {0: start, 1: ends[1]}
    assert _earliest(bootstrap, topic) == {0: start, 1: ends[1]}
    assert sorted(_group_reads(bootstrap, topic, ends[0] - start)) == _kept(delivered, {0: start, 1: ends[1]})

    with pytest.raises(KafkaException) as exc:
        _delete(bootstrap, topic, {0: ends[0] + 1})
    assert exc.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert _delete(bootstrap, topic, {0: 1}) == {0: start}  # below the start: nothing moves


def test_the_start_survives_a_sigkill(own_broker: BrokerProcess) -> None:
    from conftest import unique_topic

    bootstrap = own_broker.bootstrap
    topic = unique_topic("ck-delete-records-kill")
    create_topic_confluent(bootstrap, topic, PARTITIONS)
    delivered = _produce(bootstrap, topic, seed=42)
    ends = _ends(delivered)
    starts = {0: ends[0] - 10, 1: 1}
    assert _delete(bootstrap, topic, starts) == starts
    own_broker.kill()  # no clean shutdown, no periodic checkpoint since
    own_broker.start()
    assert _earliest(bootstrap, topic) == starts
    assert sorted(_group_reads(bootstrap, topic, sum(ends[p] - starts[p] for p in starts))) == _kept(delivered, starts)


def test_kafka_python_delete_records(bootstrap: str, make_topic: Callable[..., str]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.errors import OffsetOutOfRangeError

    topic = make_topic("kp-delete-records", PARTITIONS)
    ends = _ends(_produce(bootstrap, topic, seed=43))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
        result = admin.delete_records({tps[0]: 5, tps[1]: ends[1]})
        assert {tp.partition: r["low_watermark"] for tp, r in result.items()} == {0: 5, 1: ends[1]}
        assert {tp.partition: r["error_code"] for tp, r in result.items()} == {0: 0, 1: 0}
        assert consumer.beginning_offsets(tps) == {tps[0]: 5, tps[1]: ends[1]}
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tps[0]: ends[0] + 1})
    finally:
        consumer.close()
        admin.close()
