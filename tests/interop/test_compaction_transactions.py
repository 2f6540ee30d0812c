"""A compacted topic written by confluent-kafka's transactional and idempotent producers: compaction removes the
aborted and the obsolete records, a read_committed consumer still sees every key's latest committed value, and
after a SIGKILL the producer's transactional id carries on (no transaction looks open, its sequence is intact)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.broker import BrokerProcess
from support.topics import wait_topic_visible

KEYS = 20
TRANSACTIONS = 60


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, bytes, bytes]]:
    """Every record a consumer of ``isolation`` reads from the partition up to its end: (offset, key, value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,  # the end, past trailing transaction markers too
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes, bytes]] = []
        end = time.monotonic() + 30
        while True:
            assert time.monotonic() < end, f"read {len(records)} records, no end of partition"
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    records.append((message.offset(), message.key(), message.value()))
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return records
    finally:
        consumer.close()


def _transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "compacted-writer", "linger.ms": 1})
    producer.init_transactions(15)
    return producer


def test_compaction_of_transactional_writes_keeps_the_committed_view(tmp_path: Path) -> None:
    from conftest import unique_topic

    rng = random.Random(11)
    settings = {"log.cleaner.backoff.ms": "20", "log.cleaner.delete.retention.ms": "0"}
    broker = BrokerProcess(tmp_path / "data", settings=settings)
    broker.start()
    try:
        topic = unique_topic("compacted-txn")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"cleanup.policy": "compact", "segment.bytes": "2048"}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
        wait_topic_visible(admin, topic, 1)
        transactional = _transactional(broker.bootstrap)
        idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 1})
        committed: dict[bytes, bytes] = {}
        aborted_values = set()
        offsets_used = 0
        for n in range(TRANSACTIONS):
            commit = n % 3 != 2
            transactional.begin_transaction()
            batch = {b"k%d" % rng.randrange(KEYS): b"%s%d" % (b"t" if commit else b"a", n) for _ in range(4)}
            for key, value in batch.items():
                transactional.produce(topic, key=key, value=value, partition=0)
            offsets_used += len(batch) + 1
            if commit:
                transactional.commit_transaction(15)
                committed.update(batch)
            else:
                assert transactional.flush(15) == 0  # written to the log before the abort, not purged unsent
                transactional.abort_transaction(15)
                aborted_values.update(batch.values())
            if n % 5 == 0:  # an idempotent writer in between
                key = b"k%d" % rng.randrange(KEYS)
                idempotent.produce(topic, key=key, value=b"i%d" % n, partition=0)
                assert idempotent.flush(10) == 0
                committed[key] = b"i%d" % n
                offsets_used += 1

        def latest(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, bytes]:
            return {key: value for _, key, value in sorted(records)}

        # Every record reached the log, aborted ones too: one offset each, and one per transaction marker.
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
        assert probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] == offsets_used
        probe.close()

        # Passes follow closed segments; once they caught up, aborted records are gone (but the producer's last
        # batch, which Kafka keeps for its sequence) and most obsolete ones too.
        end = time.monotonic() + 30
        while True:
            everything = _read(broker.bootstrap, topic, "read_uncommitted")
            left_aborted = [value for _, _, value in everything if value in aborted_values]
            written = everything[-1][0] + 1
            if len(left_aborted) <= 4 and len(everything) < written / 2:
                break
            assert time.monotonic() < end, f"{len(left_aborted)} aborted and {len(everything)} of {written} left"
            transactional.begin_transaction()  # more writes close segments, and passes follow them
            transactional.produce(topic, key=b"filler", value=b"filler", partition=0)
            transactional.commit_transaction(15)
            committed[b"filler"] = b"filler"
            time.sleep(0.1)
        assert latest(_read(broker.bootstrap, topic, "read_committed")) == committed

        broker.kill()
        broker.start()
        wait_topic_visible(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 1)
        assert latest(_read(broker.bootstrap, topic, "read_committed")) == committed
        again = _transactional(broker.bootstrap)  # the id's last transaction is complete: this does not hang
        again.begin_transaction()
        again.produce(topic, key=b"k0", value=b"after the restart", partition=0)
        again.commit_transaction(15)
        committed[b"k0"] = b"after the restart"
        assert latest(_read(broker.bootstrap, topic, "read_committed")) == committed
    finally:
        broker.close()
