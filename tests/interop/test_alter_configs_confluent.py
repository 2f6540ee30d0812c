"""Interop: confluent-kafka's ``incremental_alter_configs`` and ``alter_configs`` against the broker under test, read
back with its ``describe_configs``; a lowered max.message.bytes refuses the stock producer's larger messages."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from oncelog.protocol.records.batch import iter_headers
from oncelog.storage.config import COMPRESSION_CODECS

TIMEOUT = 15


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return future.result(timeout=TIMEOUT)


def _incremental(
    admin: AdminClient,
    restype: ResourceType,
    name: str,
    *ops: tuple[str, str | None, AlterConfigOpType],
    validate_only: bool = False,
) -> None:
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops]
    resource = ConfigResource(restype, name, incremental_configs=entries)
    (future,) = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    future.result(timeout=TIMEOUT)


def _error_code(call) -> int:
    with pytest.raises(KafkaException) as exc:
        call()
    return exc.value.args[0].code()


def test_incremental_alter_configs(bootstrap: str, make_topic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-incr", 1)
    _incremental(
        admin,
        ResourceType.TOPIC,
        topic,
        ("retention.ms", "60000", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    )
    described = _describe(admin, topic)
    assert (described["retention.ms"].value, described["retention.ms"].source) == (
        "60000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert described["cleanup.policy"].value == "delete,compact"

    _incremental(
        admin,
        ResourceType.TOPIC,
        topic,
        ("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT),
        ("retention.ms", None, AlterConfigOpType.DELETE),
    )
    _incremental(admin, ResourceType.TOPIC, topic, ("segment.bytes", "4096", AlterConfigOpType.SET), validate_only=True)
    described = _describe(admin, topic)
    assert (described["cleanup.policy"].value, described["cleanup.policy"].source) == (
        "delete",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert (described["retention.ms"].value, described["retention.ms"].source) == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert described["segment.bytes"].value == "1073741824"

    def append_to_long() -> None:
        _incremental(admin, ResourceType.TOPIC, topic, ("retention.ms", "1", AlterConfigOpType.APPEND))

    def unknown_name() -> None:
        _incremental(admin, ResourceType.TOPIC, topic, ("retention.forever", "1", AlterConfigOpType.SET))

    def missing_topic() -> None:
        _incremental(admin, ResourceType.TOPIC, topic + "-none", ("retention.ms", "1", AlterConfigOpType.SET))

    def broker_config() -> None:
        _incremental(admin, ResourceType.BROKER, "1", ("num.partitions", "3", AlterConfigOpType.SET))

    assert _error_code(append_to_long) == KafkaError.INVALID_CONFIG
    assert _error_code(unknown_name) == KafkaError.INVALID_CONFIG
    assert _error_code(missing_topic) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _error_code(broker_config) == KafkaError.INVALID_REQUEST


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # the legacy API is what this tests
def test_alter_configs_replaces_the_overrides_and_the_log_follows(bootstrap: str, make_topic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-alter", 1)
    _incremental(admin, ResourceType.TOPIC, topic, ("retention.ms", "60000", AlterConfigOpType.SET))
    (future,) = admin.alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "2000"})]
    ).values()
    future.result(timeout=TIMEOUT)
    described = _describe(admin, topic)
    assert (described["max.message.bytes"].value, described["max.message.bytes"].source) == (
        "2000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert described["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # replaced, not merged

    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in (b"x" * 3000, b"small"):
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(TIMEOUT)
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert errors[1] is None


def test_log_append_time_reaches_producer_and_consumer(bootstrap: str, make_topic) -> None:
    """message.timestamp.type=LogAppendTime, set on a live topic: librdkafka's delivery report and consumer both
    get the broker's append time, typed LOG_APPEND_TIME, in place of the producer's timestamp."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-append-time", 1)
    _incremental(admin, ResourceType.TOPIC, topic, ("message.timestamp.type", "LogAppendTime", AlterConfigOpType.SET))
    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    before = int(time.time() * 1000)
    producer.produce(topic, b"stamped", partition=0, timestamp=1_000_000, on_delivery=lambda _e, m: delivered.append(m))
    producer.flush(TIMEOUT)
    after = int(time.time() * 1000)
    (report,) = delivered
    kind, appended_at = report.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= appended_at <= after

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        (message,) = consumer.consume(1, timeout=TIMEOUT)
        assert message.error() is None
        assert message.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, appended_at)
    finally:
        consumer.close()


def test_min_insync_replicas_two_fails_acks_all_delivery(bootstrap: str, make_topic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic("ck-min-isr", 1)
    _incremental(admin, ResourceType.TOPIC, topic, ("min.insync.replicas", "2", AlterConfigOpType.SET))
    errors: list[KafkaError | None] = []
    for acks in ("all", "1"):
        producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0})
        producer.produce(topic, b"v", partition=0, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(TIMEOUT)
    assert errors[0] is not None and errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert errors[1] is None


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy"])
def test_compression_type_recompresses_and_librdkafka_reads_it(bootstrap: str, make_topic, broker, codec) -> None:
    """compression.type set on a live topic: uncompressed batches from librdkafka are stored in the topic's codec
    (the segment file says so) and read back whole by librdkafka, keys, headers and timestamps included."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = make_topic(f"ck-recompress-{codec}", 1)
    _incremental(admin, ResourceType.TOPIC, topic, ("compression.type", codec, AlterConfigOpType.SET))
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 5})
    sent = [(b"k%d" % i, b"value %d " % i * 10, [("h", b"%d" % i)], 1_700_000_000_000 + i) for i in range(500)]
    for key, value, headers, ts in sent:
        producer.produce(topic, value, key, partition=0, headers=headers, timestamp=ts)
    assert producer.flush(TIMEOUT) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        while len(got) < len(sent):
            batch = consumer.consume(500, timeout=TIMEOUT)
            assert batch, f"read {len(got)} of {len(sent)}"
            got += [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in batch if m.error() is None]
    finally:
        consumer.close()
    assert got == sent
    if broker is not None:
        stored = (broker.data_dir / f"{topic}-0" / f"{0:020d}.log").read_bytes()
        assert {h.compression for _, h in iter_headers(stored)} == {COMPRESSION_CODECS[codec]}
