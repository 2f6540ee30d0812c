"""Interop: behaviours where stock clients rely on Kafka 4.x's exact answers (issue 28): per-record produce errors
(KIP-467), ListOffsets by timestamp, dynamic broker configs, GROUP config resources and ListGroups v5."""

from __future__ import annotations

import collections
import time

import kafka
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
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
    # One record error: librdkafka itself sets the partition-level error on every message of the batch
    # (rd_kafka_dr_msgq0 forces it unless record_errors_cnt > 1), against Kafka too.
    outcomes = _produce_outcomes(bootstrap, topic, [b"a", None, b"b"])
    assert outcomes == {(True, "INVALID_RECORD"): 1, (False, "INVALID_RECORD"): 2}


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


def test_list_offsets_answers_records_not_batches(bootstrap: str, make_topic) -> None:
    """confluent-kafka's list_offsets: by timestamp and max timestamp (-3, KIP-734) name a record of the batch,
    as Kafka's FileRecords.searchForTimestamp and RecordBatch.offsetOfMaxTimestamp do, with its timestamp."""
    topic = make_topic("ck-list-offsets", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    for ts in (1, 1_000_000_000_000, 5, 999_999_999_999):
        producer.produce(topic, b"v", key=b"k", partition=0, timestamp=ts)
    assert producer.flush(TIMEOUT) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = ConfluentTopicPartition(topic, 0)
    for spec, expected in (
        (OffsetSpec.max_timestamp(), (1, 1_000_000_000_000)),
        (OffsetSpec.for_timestamp(999_999_999_999), (1, 1_000_000_000_000)),
        (OffsetSpec.for_timestamp(2), (1, 1_000_000_000_000)),
        (OffsetSpec.for_timestamp(1), (0, 1)),
    ):
        info = admin.list_offsets({tp: spec})[tp].result(timeout=TIMEOUT)
        assert (info.offset, info.timestamp) == expected


def test_dynamic_broker_configs(bootstrap: str, make_topic) -> None:
    """confluent-kafka's incremental_alter_configs on this broker's BROKER resource: a dynamic config is stored,
    described with Kafka's source and read_only false, and a topic without an override takes it at once; a read-only
    config is refused with Kafka's message. (librdkafka refuses the cluster-default resource "" locally; the wire
    tests and kafkajs cover it.)"""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-dynamic", 1)

    def alter(key: str, value: str | None, op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
        entries = [ConfigEntry(key, value, incremental_operation=op)]
        (future,) = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)]
        ).values()
        future.result(timeout=TIMEOUT)

    def describe(restype: ResourceType, name: str) -> dict[str, ConfigEntry]:
        (future,) = admin.describe_configs([ConfigResource(restype, name)]).values()
        return future.result(timeout=TIMEOUT)

    try:
        alter("log.retention.ms", "7200000")
        entry = describe(ResourceType.BROKER, "1")["log.retention.ms"]
        assert (entry.value, entry.source, entry.is_read_only) == (
            "7200000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
            False,
        )
        assert describe(ResourceType.BROKER, "1")["num.partitions"].is_read_only
        entry = describe(ResourceType.TOPIC, topic)["retention.ms"]
        assert (entry.value, entry.source) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        with pytest.raises(KafkaException) as refused:
            alter("num.partitions", "3")
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
        assert "Cannot update these configs dynamically: Set(num.partitions)" in refused.value.args[0].str()
    finally:  # the module's broker is shared: leave its config as it was
        alter("log.retention.ms", None, AlterConfigOpType.DELETE)
    entry = describe(ResourceType.TOPIC, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)


def test_unknown_config_of_a_missing_topic_is_unknown_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("retention.forever", "1", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, "ck-no-such-topic", incremental_configs=[entry])
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_max_compaction_lag_is_a_topic_config(bootstrap: str) -> None:
    from conftest import unique_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("ck-lag")
    configs = {"cleanup.policy": "compact", "max.compaction.lag.ms": "60000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=TIMEOUT)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entry = future.result(timeout=TIMEOUT)["max.compaction.lag.ms"]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    entries = [ConfigEntry("max.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)]
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]
    ).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_group_configs(bootstrap: str) -> None:
    """confluent-kafka's incremental_alter_configs / describe_configs of a GROUP resource (KIP-848): the broker's
    defaults until set, GROUP_CONFIG once set, Kafka's bounds refused with INVALID_CONFIG."""
    from conftest import unique_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = unique_topic("ck-group-configs")

    def alter(key: str, value: str | None, op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
        entries = [ConfigEntry(key, value, incremental_operation=op)]
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(timeout=TIMEOUT)

    def describe() -> dict[str, tuple[str, int]]:
        (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
        return {name: (e.value, e.source) for name, e in future.result(timeout=TIMEOUT).items()}

    assert describe() == {
        "consumer.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "consumer.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
    }
    alter("consumer.heartbeat.interval.ms", "6000")
    assert describe()["consumer.heartbeat.interval.ms"] == ("6000", ConfigSource.GROUP_CONFIG.value)
    with pytest.raises(KafkaException) as refused:
        alter("consumer.session.timeout.ms", "61000")
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    alter("consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE)
    assert describe()["consumer.heartbeat.interval.ms"] == ("5000", ConfigSource.DEFAULT_CONFIG.value)


def test_list_groups_by_type(bootstrap: str, make_topic) -> None:
    """ListGroups v5: librdkafka lists a subscribed group as CLASSIC, keeps it under the CLASSIC type filter with a
    state filter, and leaves it out under the CONSUMER one."""
    from conftest import unique_topic

    topic = make_topic("ck-types", 1)
    group = unique_topic("ck-types-group")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()

        def listed(**filters) -> dict[str, tuple[ConsumerGroupState, ConsumerGroupType]]:
            result = admin.list_consumer_groups(**filters).result(timeout=TIMEOUT)
            return {g.group_id: (g.state, g.type) for g in result.valid}

        assert listed()[group] == (ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC)
        stable_classic = listed(types={ConsumerGroupType.CLASSIC}, states={ConsumerGroupState.STABLE})
        assert stable_classic[group] == (ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC)
        assert group not in listed(types={ConsumerGroupType.CONSUMER})
        assert group not in listed(types={ConsumerGroupType.CLASSIC}, states={ConsumerGroupState.EMPTY})
    finally:
        consumer.close()
