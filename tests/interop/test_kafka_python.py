"""Interop: kafka-python 3.0 against the broker under test."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidPartitionsError, InvalidTopicError, TopicAlreadyExistsError
from support.dataset import CODECS, Consumed, Delivered, SampleRecord, check_roundtrip, make_records

N_RECORDS = 10_000
PARTITIONS = 3
DEADLINE_S = 40.0
CREATE_TIME = 0  # ConsumerRecord.timestamp_type for CreateTime


def produce_all(bootstrap: str, topic: str, records: list[SampleRecord], **conf: object) -> list[Delivered]:
    """Send ``records`` in order (kafka-python defaults: idempotent, acks=all, Java murmur2 partitioner)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    try:
        futures = [
            producer.send(topic, key=rec.key, value=rec.value, headers=list(rec.headers), timestamp_ms=rec.timestamp_ms)
            for rec in records
        ]
        producer.flush(timeout=DEADLINE_S)
        out = []
        for i, fut in enumerate(futures):
            md = fut.get(timeout=1)
            out.append(Delivered(i, md.partition, md.offset))
        return out
    finally:
        producer.close(timeout=5)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, **conf: object) -> list[Consumed]:
    """Manually assign every partition (no group), seek to beginning, read until ``expected`` arrived."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        while len(out) < expected:
            assert time.monotonic() < end, f"consumed {len(out)}/{expected} in {DEADLINE_S}s"
            for tp_records in consumer.poll(timeout_ms=500, max_records=5000).values():
                for m in tp_records:
                    out.append(
                        Consumed(
                            m.partition,
                            m.offset,
                            m.key,
                            m.value,
                            tuple(m.headers or ()),
                            m.timestamp if m.timestamp_type == CREATE_TIME else -1,
                        )
                    )
        extra = consumer.poll(timeout_ms=500)
        assert not any(extra.values()), "consumed more records than produced"
        return out
    finally:
        consumer.close()


def test_admin_create_topics(bootstrap: str) -> None:
    from conftest import unique_topic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        name = unique_topic("kp-admin")
        spec = {name: {"num_partitions": PARTITIONS, "replication_factor": 1}}
        admin.create_topics(spec, wait_for_metadata=True)
        [described] = [t for t in admin.describe_topics([name])]
        assert described["error_code"] == 0
        assert len(described["partitions"]) == PARTITIONS

        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics(spec)
        with pytest.raises(InvalidTopicError):
            admin.create_topics({"bad topic name!": {"num_partitions": 1, "replication_factor": 1}})
        assert "bad topic name!" not in admin.list_topics()
    finally:
        admin.close()


def test_admin_describe_cluster_and_create_partitions(bootstrap: str, make_topic, monkeypatch) -> None:
    import kafka.admin._cluster
    from confluent_kafka.admin import AdminClient

    cluster_id = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).cluster_id
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with monkeypatch.context() as patch:
            # Its fallback for brokers without DescribeCluster (API 60) is a Metadata request; take that away.
            patch.setattr(kafka.admin._cluster, "MetadataRequest", None)
            described = admin.describe_cluster()
        host, port = bootstrap.rsplit(":", 1)
        assert described["cluster_id"] == cluster_id and cluster_id
        assert described["controller_id"] == 1
        assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in described["brokers"]] == [
            (1, host, int(port), None)
        ]
        assert set(described["authorized_operations"]) == {
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
        }

        topic = make_topic("kp-grow", 1)
        admin.create_partitions({topic: PARTITIONS})
        [grown] = admin.describe_topics([topic])
        assert sorted(p["partition_index"] for p in grown["partitions"]) == list(range(PARTITIONS))
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: PARTITIONS})
    finally:
        admin.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(bootstrap: str, make_topic, codec: str) -> None:
    topic = make_topic(f"kp-{codec}", PARTITIONS)
    # kafka-python cannot send a header with a null value.
    records = make_records(
        N_RECORDS, seed=100 + CODECS.index(codec), null_header_values=False, null_key_and_value=False
    )
    delivered = produce_all(bootstrap, topic, records, compression_type=None if codec == "none" else codec)
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records), isolation_level="read_committed")
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


def test_idempotent_producer_offsets(bootstrap: str, make_topic) -> None:
    topic = make_topic("kp-idem", PARTITIONS)
    records = make_records(N_RECORDS, seed=8, null_header_values=False, null_key_and_value=False)
    delivered = produce_all(bootstrap, topic, records, enable_idempotence=True, acks="all")
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records), isolation_level="read_uncommitted")
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)
    assert len({(d.partition, d.offset) for d in delivered}) == len(delivered)
