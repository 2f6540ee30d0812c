"""A compacted topic under SIGKILL: each key keeps its latest acknowledged value, or a later one, through kills that
land while records are written and compaction passes run (the pass runs in a child process a kill leaves behind)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.broker import BrokerProcess
from support.topics import wait_topic_visible

KEYS = 40
ROUNDS = 5
#: How long a writer whose broker was killed waits for the delivery reports of what the broker acknowledged.
STOPPED_FLUSH_S = 0.5


def _produce_until(bootstrap: str, topic: str, round_: int, stop: threading.Event, acked: dict) -> None:
    """acks=all records (no idempotence: such batches are compacted) until ``stop``; ``acked`` gets each key's
    acknowledged (offset, value) with the highest offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 3000})

    def delivered(err, msg) -> None:
        if err is None and acked.get(msg.key(), (-1, b""))[0] < msg.offset():
            acked[msg.key()] = (msg.offset(), msg.value())

    i = 0
    while not stop.is_set():
        key = b"key-%d" % (i % KEYS)
        with contextlib.suppress(BufferError):  # the queue is full while the broker is down
            producer.produce(topic, value=b"%d-%d" % (round_, i), key=key, partition=0, on_delivery=delivered)
        producer.poll(0.001)
        i += 1
    # The broker is dead by now: what it acknowledged has arrived; the rest can only expire (message.timeout.ms,
    # seconds a round). Serve the arrived reports, then drop the rest.
    producer.flush(STOPPED_FLUSH_S)
    producer.purge()
    producer.flush(5)  # purged records report at once (as failed)


def _read_latest(bootstrap: str, topic: str) -> tuple[dict[bytes, tuple[int, bytes]], int]:
    """Each key's record with the highest offset, and how many records the partition holds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        latest: dict[bytes, tuple[int, bytes]] = {}
        count, position = 0, 0
        end = time.monotonic() + 30
        while position < high:
            assert time.monotonic() < end, f"read up to {position} of {high}"
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                latest[message.key()] = (message.offset(), message.value())
                count, position = count + 1, message.offset() + 1
        return latest, count
    finally:
        consumer.close()


def test_latest_acknowledged_values_survive_kills_during_compaction(tmp_path: Path) -> None:
    from conftest import unique_topic

    rng = random.Random(5)
    broker = BrokerProcess(tmp_path / "data", settings={"log.cleaner.backoff.ms": "20"})
    broker.start()
    try:
        topic = unique_topic("compacted-kill")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"cleanup.policy": "compact", "segment.bytes": "4096"}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
        acked: dict[bytes, tuple[int, bytes]] = {}
        for round_ in range(ROUNDS):
            wait_topic_visible(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 1)
            stop = threading.Event()
            writer = threading.Thread(target=_produce_until, args=(broker.bootstrap, topic, round_, stop, acked))
            writer.start()
            time.sleep(rng.uniform(0.5, 1.5))
            broker.kill()
            stop.set()
            writer.join(30)
            broker.start()
            assert "compacted" in broker.stderr_tail(200_000), "no compaction pass ran before the kill"

        wait_topic_visible(AdminClient({"bootstrap.servers": broker.bootstrap}), topic, 1)
        latest, count = _read_latest(broker.bootstrap, topic)
        assert len(acked) == KEYS
        for key, (offset, value) in acked.items():
            got_offset, got_value = latest[key]
            assert got_offset >= offset, f"{key!r}: acknowledged at {offset}, latest read at {got_offset}"
            if got_offset == offset:
                assert got_value == value
        written = max(offset for offset, _ in latest.values()) + 1
        assert count < written / 4, f"{count} of {written} records left: compaction did not keep up"
    finally:
        broker.close()
