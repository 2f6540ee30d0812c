"""Interop: confluent-kafka (librdkafka 2.16) against the broker under test."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from support.confluent_io import consume_all, produce_all
from support.dataset import CODECS, check_roundtrip, make_records
from support.topics import wait_topic_visible

N_RECORDS = 10_000
PARTITIONS = 3


def test_admin_create_topics(bootstrap: str) -> None:
    from conftest import unique_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = unique_topic("ck-admin")
    admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=10)[name].result(timeout=15)
    wait_topic_visible(admin, name, PARTITIONS)

    again = admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=10)[name]
    with pytest.raises(KafkaException) as exc:
        again.result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    bad = "bad topic name!"
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(bad, 1, 1)], operation_timeout=10)[bad].result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, code 17
    assert bad not in admin.list_topics(timeout=5).topics


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(bootstrap: str, make_topic, codec: str) -> None:
    topic = make_topic(f"ck-{codec}", PARTITIONS)
    records = make_records(N_RECORDS, seed=hash(codec) & 0xFFFF)
    delivered = produce_all(bootstrap, topic, records, **{"compression.type": codec})
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records))  # librdkafka default: read_committed
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


def test_idempotent_producer_offsets(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-idem", PARTITIONS)
    records = make_records(N_RECORDS, seed=7)
    delivered = produce_all(
        bootstrap,
        topic,
        records,
        **{"enable.idempotence": True, "compression.type": "lz4", "max.in.flight.requests.per.connection": 5},
    )
    consumed = consume_all(
        bootstrap, topic, PARTITIONS, len(records), **{"isolation.level": "read_uncommitted"}
    )
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)
    offsets = [(d.partition, d.offset) for d in delivered]
    assert len(set(offsets)) == len(offsets)
