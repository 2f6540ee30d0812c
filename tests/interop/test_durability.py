"""Durability: acks=all records survive SIGKILL of the broker, byte for byte, across two restarts."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from support.broker import BrokerProcess
from support.confluent_io import consume_all, produce_all
from support.dataset import check_roundtrip, make_records
from support.topics import create_topic_confluent, wait_topic_visible

N_RECORDS = 5_000
PARTITIONS = 3


def test_acknowledged_records_survive_sigkill(own_broker: BrokerProcess) -> None:
    from conftest import unique_topic

    topic = unique_topic("durable")
    create_topic_confluent(own_broker.bootstrap, topic, PARTITIONS)
    records = make_records(N_RECORDS, seed=11)
    delivered = produce_all(
        own_broker.bootstrap, topic, records, **{"enable.idempotence": True, "compression.type": "zstd"}
    )

    for _ in range(2):
        own_broker.restart(hard=True)  # SIGKILL: no chance to flush or close segments cleanly
        wait_topic_visible(AdminClient({"bootstrap.servers": own_broker.bootstrap}), topic, PARTITIONS)
        consumed = consume_all(own_broker.bootstrap, topic, PARTITIONS, len(records))
        check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)

    # Still writable after recovery: new records continue the offsets.
    more = make_records(100, seed=12)
    delivered2 = produce_all(own_broker.bootstrap, topic, more, **{"enable.idempotence": True})
    per_partition = {p: sum(1 for d in delivered if d.partition == p) for p in range(PARTITIONS)}
    for d in delivered2:
        assert d.offset >= per_partition[d.partition]
    own_broker.stop()
