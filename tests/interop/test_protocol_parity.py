"""Interop: behaviours where stock clients rely on Kafka 4.x's exact answers (issue 28): per-record produce errors
(KIP-467), ListOffsets by timestamp, dynamic broker configs, GROUP config resources and ListGroups v5."""

from __future__ import annotations

import collections

import kafka
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.structs import TopicPartition

TIMEOUT = 15


def _compacted_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": "compact"})])[name].result(timeout=TIMEOUT)


def _produce_outcomes(bootstrap: str, topic: str, keys: list[bytes | None], **conf: object) -> collections.Counter:
    """Produce one message per key to partition 0 (lingering so they share batches); count (keyless?, error name)."""
    outcomes: collections.Counter = collections.Counter()

    def delivered(err: KafkaError | None, msg) -> None:
        outcomes[(msg.key() is None, err.name() if err else None)] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, **conf})
    for i, key in enumerate(keys):
        producer.produce(topic, b"value-%d" % i, key=key, partition=0, on_delivery=delivered)
    assert producer.flush(TIMEOUT) == 0
    return outcomes


def test_keyless_records_on_a_compacted_topic_fail_alone(bootstrap: str) -> None:
    """librdkafka's 0011 test: Kafka lists every keyless record of a batch in ``record_errors``, so librdkafka fails
    those with INVALID_RECORD and the rest of the batch with _INVALID_DIFFERENT_RECORD; one message per batch,
    the keyed ones are stored."""
    from conftest import unique_topic

    topic = unique_topic("ck-keyless")
    _compacted_topic(bootstrap, topic)
    keys = [None if i % 10 == 0 else b"key-%d" % i for i in range(100)]
    for codec in ("none", "lz4"):
        outcomes = _produce_outcomes(bootstrap, topic, keys, **{"compression.type": codec})
        assert outcomes == {(True, "INVALID_RECORD"): 10, (False, "_INVALID_DIFFERENT_RECORD"): 90}, codec
    outcomes = _produce_outcomes(bootstrap, topic, keys, **{"batch.size": 1})
    assert outcomes == {(True, "INVALID_RECORD"): 10, (False, None): 90}


def test_offsets_for_times_names_the_first_record_reaching_the_timestamp(bootstrap: str, make_topic) -> None:
    """Kafka answers the first *record* whose timestamp reaches the target, with its timestamp, not the base offset
    of the batch holding it (kafka-python's offsets_for_times shows both)."""
    topic = make_topic("ck-times", 1)
    stamps = [1, 999_999_999_999, 5, 1_000_000_000_000]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    for ts in stamps:
        producer.produce(topic, b"v", key=b"k", partition=0, timestamp=ts)
    assert producer.flush(TIMEOUT) == 0
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: 999_999_999_999})[tp]
        assert (found.offset, found.timestamp) == (1, 999_999_999_999)
        found = consumer.offsets_for_times({tp: 6})[tp]
        assert (found.offset, found.timestamp) == (1, 999_999_999_999)
        found = consumer.offsets_for_times({tp: 1_000_000_000_000})[tp]
        assert (found.offset, found.timestamp) == (3, 1_000_000_000_000)
        assert consumer.offsets_for_times({tp: 1_000_000_000_001})[tp] is None
    finally:
        consumer.close()
