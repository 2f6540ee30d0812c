"""What a stock read_committed reader (confluent-kafka, assigned partitions: no group coordinator involved) sees."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition


def read_committed_values(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    done: Callable[[list[bytes]], bool],
    deadline_s: float = 60.0,
) -> list[bytes]:
    """Values of ``partitions`` read from the beginning, once ``done(values)`` holds and every partition is read to
    its end (its last stable offset), or whatever was read after ``deadline_s``."""
    wanted = list(partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        end = time.monotonic() + deadline_s
        while not (done(values) and len(at_end) == len(wanted)) and time.monotonic() < end:
            for message in consumer.consume(num_messages=1000, timeout=0.3):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                values.append(message.value())
    finally:
        consumer.close()
    return values
