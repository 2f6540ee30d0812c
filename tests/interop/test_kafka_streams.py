"""Interop: a Kafka Streams application (kafka-streams, the version ``java/pom.xml`` pins) with
``processing.guarantee=exactly_once_v2`` against the broker under test, which is SIGKILLed and restarted while the
application is processing.

``java/src/main/java/oncelog/javacheck/StreamsCount.java`` counts the records of each key of an input topic in a
persistent store (backed by a changelog topic) and writes every new count to an output topic (record cache off, so
one output record per input record). Exactly once means that, read ``read_committed``, each key's counts on the
output topic are exactly 1, 2, ..., n: no count repeated (a duplicate update), none skipped (a lost one), the last
being the number of input records of that key, whatever the crashes made the application abort and redo. After the
broker's restart the application itself is SIGKILLed mid-transaction and started again on its state dir: with
``at_least_once`` instead, that crash makes counts repeat and this test fails (checked by hand).

The same scenario passes against Apache Kafka 4.1.1 (``support.kafka_peer.KafkaPeer``, SIGKILLed and restarted the
same way): run ``PYTHONPATH=tests python tests/interop/test_kafka_streams.py`` by hand (done for issue 30).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support import kafka_jars
from support.broker import BrokerProcess
from support.java_programs import JVM_OPTIONS
from support.topics import create_topic_confluent

PARTITIONS = 2
KEYS = 12
BEFORE_CRASH = 300  # input records seeded before the application starts
AFTER_CRASH = 600  # input records seeded once the broker is back (the application is killed among them)
DELAY_MS = "10"  # per record in the application: the crash lands while records are in flight
CRASH_AFTER_OUTPUT = 60  # output records (uncommitted included) written before each kill
DEADLINE_S = 120.0


def seed(bootstrap: str, topic: str, start: int, count: int, truth: dict[str, int]) -> None:
    """Produce ``count`` records with an idempotent producer, keys round-robin; add them to ``truth``."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + count):
        key = f"k{i % KEYS}"
        producer.produce(topic, key=key.encode(), value=b"v%d" % i)
        truth[key] = truth.get(key, 0) + 1
    assert producer.flush(30) == 0, "seed records undelivered"


def output_high_watermark(bootstrap: str, topic: str) -> int:
    """The sum of the output topic's high watermarks (uncommitted records included)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streams-probe"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


def read_counts(bootstrap: str, topic: str, until: Callable[[dict[str, list[int]]], bool]) -> dict[str, list[int]]:
    """Each key's counts in offset order, read read_committed from the beginning until ``until`` holds and every
    partition is read to its end (or the deadline passes)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "streams-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    counts: dict[str, list[int]] = {}
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        end = time.monotonic() + DEADLINE_S
        while not (until(counts) and len(at_end) == PARTITIONS) and time.monotonic() < end:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                counts.setdefault(m.key().decode(), []).append(int.from_bytes(m.value(), "big", signed=True))
    finally:
        consumer.close()
    return counts


def wait_output_past(bootstrap: str, sink: str, target: int, app: subprocess.Popen[bytes]) -> None:
    """Wait until the output topic's high watermarks add up to ``target`` (the application still running)."""
    end = time.monotonic() + DEADLINE_S
    while output_high_watermark(bootstrap, sink) < target:
        assert app.poll() is None, f"StreamsCount exited {app.returncode}"
        assert time.monotonic() < end, f"StreamsCount's output did not reach {target} records"
        time.sleep(0.2)


def run_scenario(bootstrap: Callable[[], str], bounce: Callable[[], None], work: Path) -> None:
    """Seed, start StreamsCount, ``bounce`` the broker mid-processing, seed more, SIGKILL the application
    mid-processing and start it again on its state dir, and assert the output exact."""
    tag = f"s{os.getpid()}-{time.monotonic_ns()}"
    source, sink = f"{tag}-in", f"{tag}-out"
    create_topic_confluent(bootstrap(), source, PARTITIONS)
    create_topic_confluent(bootstrap(), sink, PARTITIONS)
    truth: dict[str, int] = {}
    seed(bootstrap(), source, 0, BEFORE_CRASH, truth)
    log = open(work / "streams.log", "a+", encoding="utf-8")  # noqa: SIM115 - closed in finally
    argv = [kafka_jars.java(), *JVM_OPTIONS, "-cp", kafka_jars.classpath(), "oncelog.javacheck.StreamsCount"]
    argv += [bootstrap(), tag, source, sink, str(work / "state"), DELAY_MS]
    app = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_output_past(bootstrap(), sink, CRASH_AFTER_OUTPUT, app)
        bounce()
        seed(bootstrap(), source, BEFORE_CRASH, AFTER_CRASH, truth)
        # The application dies mid-transaction: its successor must abort that transaction (fencing its producer)
        # and restore the count from the changelog's committed records only.
        wait_output_past(bootstrap(), sink, output_high_watermark(bootstrap(), sink) + CRASH_AFTER_OUTPUT, app)
        os.killpg(app.pid, signal.SIGKILL)
        app.wait(10)
        log.write("==== StreamsCount SIGKILLed, started again\n")
        log.flush()
        app = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        counts = read_counts(bootstrap(), sink, lambda seen: all(seen.get(k, [0])[-1] >= n for k, n in truth.items()))
        assert app.poll() is None, f"StreamsCount exited {app.returncode}"
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGTERM)
            try:
                app.wait(30)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait(10)
        log.seek(0)
        app_log = log.read()
        log.close()
    assert {k: v[-1] for k, v in counts.items()} == truth, app_log[-6000:]
    for key, seen in counts.items():
        assert seen == list(range(1, truth[key] + 1)), f"{key}: {seen}"
    assert app_log.count("state\tRUNNING") >= 2  # both runs of the application got to process
    # The count lives in a store backed by the changelog topic Streams created through the admin API.
    topics = AdminClient({"bootstrap.servers": bootstrap()}).list_topics(timeout=10).topics
    assert f"{tag}-counts-changelog" in topics, sorted(topics)


def test_exactly_once_v2_count_survives_broker_and_application_sigkill(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data",
        settings={"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"},
    )
    try:
        broker.start()

        def bounce() -> None:
            assert broker.kill() == -signal.SIGKILL
            broker.start()

        run_scenario(lambda: broker.bootstrap, bounce, tmp_path)
    finally:
        broker.close()


if __name__ == "__main__":
    # By hand (PYTHONPATH=tests): the same scenario against Apache Kafka, SIGKILLed and restarted on its log dir.
    from support.kafka_peer import KafkaPeer

    with KafkaPeer(fsync=False) as peer, tempfile.TemporaryDirectory() as work:
        run_scenario(lambda: peer.bootstrap, lambda: peer.restart(hard=True), Path(work))
    print("Kafka Streams exactly_once_v2 scenario: passed against Apache Kafka", kafka_jars.kafka_version())
