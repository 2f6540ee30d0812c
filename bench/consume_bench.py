"""P6: read_committed consume rate of a prefilled partition (confluent-kafka consumer, assign, no group).

Both peers are prefilled by the same producer (``produce_bench.produce``: idempotent, acks=all, linger.ms=5, 100 B
records, one partition) with compression.type=zstd: librdkafka's mock keeps only the last ~5 MB of a partition
(older batches are dropped and a consumer from the beginning is reset to the end), and 1M compressed records fit
in that (~1.5 MB) where 1M uncompressed ones (~110 MB) do not. Then one consumer reads from the beginning until it
has every record; the time runs from ``assign`` to the last record.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench import produce_bench
from bench.txn_bench import create_topic
from tests.support.broker import BrokerProcess
from tests.support.kafka_peer import KafkaPeer
from tests.support.mock_cluster import MockCluster

TOPIC = produce_bench.TOPIC
DEADLINE_S = 300.0
PREFILL_CONF = {"compression.type": "zstd"}
CONSUMER_CONF = {
    "group.id": "oncelog-bench-unused",  # required by the client; no group APIs are used (assign only)
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
}


@dataclass(frozen=True)
class ConsumeResult:
    peer: str
    records: int
    seconds: float
    records_per_s: float
    broker_cpu_s: float | None = None


def consume(bootstrap: str, n: int) -> float:
    """Seconds to read ``n`` records of TOPIC/0 from the beginning with read_committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    try:
        got = 0
        start = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        while got < n:
            if time.perf_counter() - start > DEADLINE_S:
                raise RuntimeError(f"consumed {got}/{n} in {DEADLINE_S}s")
            for m in consumer.consume(num_messages=min(10_000, n - got), timeout=0.5):
                if m.error() is not None:
                    raise RuntimeError(f"consumer error: {m.error()}")
                got += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def bench_oncelog(n: int) -> ConsumeResult:
    with BrokerProcess() as broker:
        return _bench_broker("oncelog", broker, n)


def bench_kafka(n: int) -> ConsumeResult:
    """The same against Apache Kafka, prefilled with an fsync per append as oncelog is (reads do not fsync)."""
    with KafkaPeer(fsync=True) as kafka:
        return _bench_broker("kafka", kafka, n)


def _bench_broker(peer: str, broker: BrokerProcess | KafkaPeer, n: int) -> ConsumeResult:
    create_topic(broker.bootstrap, TOPIC, 1)
    produce_bench.produce(broker.bootstrap, n, conf=PREFILL_CONF)
    consume(broker.bootstrap, min(n, 10_000))  # warm-up: codecs, caches
    cpu0 = broker.cpu_seconds()
    secs = consume(broker.bootstrap, n)
    cpu = broker.cpu_seconds() - cpu0
    return ConsumeResult(peer, n, secs, n / secs, cpu)


def bench_mock(n: int) -> ConsumeResult:
    with MockCluster(1) as mock:
        mock.create_topic(TOPIC, 1)
        produce_bench.produce(mock.bootstrap, n, conf=PREFILL_CONF)
        consume(mock.bootstrap, min(n, 10_000))
        secs = consume(mock.bootstrap, n)
    return ConsumeResult("mock", n, secs, n / secs)
