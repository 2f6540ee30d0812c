"""Durability: acks=all records survive SIGKILL of the broker, byte for byte, across two restarts."""

from __future__ import annotations

from pathlib import Path

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


def test_torn_tail_after_sigkill_is_truncated_not_fatal(own_broker: BrokerProcess) -> None:
    """A half-written batch and garbage at the end of the active segment (what a crash mid-write leaves) are cut
    off at restart; every acknowledged record is still there and the partition takes new writes."""
    from conftest import unique_topic

    topic = unique_topic("torn")
    create_topic_confluent(own_broker.bootstrap, topic, 1)
    records = make_records(2_000, seed=21)
    delivered = produce_all(own_broker.bootstrap, topic, records, **{"enable.idempotence": True})
    own_broker.kill()

    segment = sorted((own_broker.data_dir / f"{topic}-0").glob("*.log"))[-1]
    intact_size = segment.stat().st_size
    with segment.open("ab") as f:
        # A batch header claiming 5000 bytes of which only a few arrive, then random garbage.
        f.write((0).to_bytes(8, "big") + (5000).to_bytes(4, "big") + b"\xff" * 40 + bytes(range(256)) * 3)

    own_broker.start()
    wait_topic_visible(AdminClient({"bootstrap.servers": own_broker.bootstrap}), topic, 1)
    assert segment.stat().st_size == intact_size
    consumed = consume_all(own_broker.bootstrap, topic, 1, len(records))
    check_roundtrip(records, delivered, consumed, num_partitions=1)
    more = produce_all(own_broker.bootstrap, topic, make_records(10, seed=22))
    assert min(d.offset for d in more) == len(records)
    own_broker.stop()


def test_sigterm_to_the_whole_process_group_is_a_clean_shutdown(own_broker: BrokerProcess) -> None:
    """A service manager stopping the broker signals every process of its group, the fsync helper too. With a
    producer still sending acks=all batches (so fsyncs are being waited for), the broker shuts down cleanly: exit 0
    and the clean-shutdown marker. The helper leaves with it."""
    import os
    import signal
    import threading
    import time

    from confluent_kafka import Producer
    from conftest import unique_topic
    from oncelog.storage.log_manager import CLEAN_SHUTDOWN_MARKER
    from support.broker import child_pids

    topic = unique_topic("group-term")
    create_topic_confluent(own_broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0})
    stop = threading.Event()

    def keep_producing() -> None:
        while not stop.is_set():
            producer.produce(topic, b"x" * 100)
            producer.poll(0.001)

    sender = threading.Thread(target=keep_producing)
    sender.start()
    try:
        time.sleep(0.5)
        assert own_broker.proc is not None
        [helper] = child_pids(own_broker.proc.pid)
        # A group signal in its worst order: the helper gets it first, the broker a moment later.
        os.kill(helper, signal.SIGTERM)
        time.sleep(0.2)
        os.kill(own_broker.proc.pid, signal.SIGTERM)
        assert own_broker.wait_exit(30) == 0, own_broker.stderr_tail()
    finally:
        stop.set()
        sender.join()
    assert (own_broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert not Path(f"/proc/{helper}").exists()  # the broker waited for it before exiting
