"""confluent-kafka produce/consume helpers that report every record's fate (shared by interop tests)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from .dataset import Consumed, Delivered, SampleRecord

DEADLINE_S = 40.0


def produce_all(bootstrap: str, topic: str, records: list[SampleRecord], **conf: object) -> list[Delivered]:
    """Produce ``records`` in order and return one delivery report per record (raises on any error)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "acks": "all",
            "linger.ms": 5,
            **conf,
        }
    )
    delivered: list[Delivered] = []
    errors: list[str] = []

    def report(index: int):
        def cb(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                delivered.append(Delivered(index, msg.partition(), msg.offset()))  # type: ignore[attr-defined]

        return cb

    for i, rec in enumerate(records):
        producer.produce(
            topic,
            key=rec.key,
            value=rec.value,
            headers=list(rec.headers),
            timestamp=rec.timestamp_ms,
            on_delivery=report(i),
        )
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    assert remaining == 0, f"{remaining} records undelivered after {DEADLINE_S}s"
    assert not errors, errors[:5]
    return delivered


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, **conf: object) -> list[Consumed]:
    """Assign every partition from the beginning and read until ``expected`` records arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "oncelog-interop-unused",  # required by the client; no group APIs are used
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **conf,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        while len(out) < expected:
            assert time.monotonic() < end, f"consumed {len(out)}/{expected} in {DEADLINE_S}s"
            for m in consumer.consume(num_messages=2000, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"consumer error: {m.error()}")
                ts_type, ts = m.timestamp()
                out.append(
                    Consumed(
                        m.partition(),
                        m.offset(),
                        m.key(),
                        m.value(),
                        tuple(m.headers() or ()),
                        ts if ts_type == TIMESTAMP_CREATE_TIME else -1,
                    )
                )
        # Nothing beyond what was produced shows up.
        extra = consumer.consume(num_messages=10, timeout=0.5)
        assert not [m for m in extra if m.error() is None], "consumed more records than produced"
        return out
    finally:
        consumer.close()


def commit_then_abort(conf: dict[str, str], topic: str, partitions: int, count: int) -> list[bytes]:
    """A transactional producer commits ``count`` records (``committed-<i>``, over ``partitions`` partitions), then
    aborts one more; returns, sorted, the values a read_committed consumer with the same ``conf`` reads back."""
    producer = Producer({**conf, "transactional.id": f"txn-{uuid.uuid4()}"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % partitions)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted", partition=0)
    producer.abort_transaction(DEADLINE_S)
    consumer = Consumer(
        {
            **conf,
            "group.id": f"g-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[bytes] = []
        end = time.monotonic() + DEADLINE_S
        while len(values) < count and time.monotonic() < end:
            values += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
        values += [m.value() for m in consumer.consume(100, timeout=1.0) if m.error() is None]  # anything more
    finally:
        consumer.close()
    return sorted(values)
