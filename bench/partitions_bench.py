"""P9: produce throughput over many partitions vs one, and the broker's idle memory per partition.

Throughput: ``produce_bench.produce`` (P1's producer: idempotent, acks=all, linger.ms=5, 100 B records) with
record i sent to partition i % P, against a topic of P = 1 and P = 1,000 partitions (alternating rounds,
medians), on oncelog and on librdkafka's mock (the mock's ratio shows how much of the drop is the client's:
1,000 partitions means ~1,000x smaller batches; librdkafka also sends each partition's batch in a request of its
own, at most 5 in flight per connection with idempotence, so the rate follows the broker's latency per request).
``throughput_kafka`` measures the same against Apache Kafka with an fsync per append (``log.flush.interval.messages=1``,
as oncelog's default; ``tests/support/kafka_peer.py``).
Memory: VmRSS of a fresh broker before and after creating a
1,000-partition topic (no data), each read after the broker has been idle for ``SETTLE_S``.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import produce_bench
from bench.produce_bench import warmup_records
from bench.txn_bench import create_topic
from tests.support.broker import BrokerProcess
from tests.support.kafka_peer import KafkaPeer
from tests.support.mock_cluster import MockCluster
from tests.support.topics import wait_topic_visible

TOPIC = "bench-p9"
SETTLE_S = 1.0


@dataclass(frozen=True)
class PartitionsResult:
    peer: str
    records: int
    partitions: int
    one_partition_records_per_s: float
    many_partitions_records_per_s: float

    @property
    def ratio(self) -> float:
        return self.many_partitions_records_per_s / self.one_partition_records_per_s


@dataclass(frozen=True)
class MemoryResult:
    partitions: int
    rss_before_kb: int
    rss_after_kb: int

    @property
    def kb_per_partition(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) / self.partitions


def _rates(bootstrap: str, partitions: int, n: int, rounds: int) -> tuple[float, float]:
    """(rec/s to 1 partition, rec/s over ``partitions``): after a warm-up of each, alternating rounds; medians."""
    one, many = TOPIC + "-1", f"{TOPIC}-{partitions}"
    produce_bench.produce(bootstrap, warmup_records(n), topic=one)
    produce_bench.produce(bootstrap, warmup_records(n), topic=many, partitions=partitions)
    one_s, many_s = [], []
    for _ in range(rounds):
        one_s.append(produce_bench.produce(bootstrap, n, topic=one))
        many_s.append(produce_bench.produce(bootstrap, n, topic=many, partitions=partitions))
    return n / statistics.median(one_s), n / statistics.median(many_s)


def throughput_oncelog(
    n: int, partitions: int, rounds: int = 1, settings: dict[str, str] | None = None
) -> PartitionsResult:
    """``settings``: broker properties (e.g. page-cache mode; default: fsync before acknowledging)."""
    with BrokerProcess(settings=settings or {}) as broker:
        create_topic(broker.bootstrap, TOPIC + "-1", 1)
        create_topic(broker.bootstrap, f"{TOPIC}-{partitions}", partitions)
        one, many = _rates(broker.bootstrap, partitions, n, rounds)
    return PartitionsResult("oncelog", n, partitions, one, many)


def throughput_mock(n: int, partitions: int, rounds: int = 1) -> PartitionsResult:
    with MockCluster(1) as mock:
        mock.create_topic(TOPIC + "-1", 1)
        mock.create_topic(f"{TOPIC}-{partitions}", partitions)
        one, many = _rates(mock.bootstrap, partitions, n, rounds)
    return PartitionsResult("mock", n, partitions, one, many)


def throughput_kafka(n: int, partitions: int, rounds: int = 1) -> PartitionsResult:
    """``throughput_oncelog`` against Apache Kafka, fsync per append."""
    with KafkaPeer(fsync=True) as kafka:
        create_topic(kafka.bootstrap, TOPIC + "-1", 1)
        create_topic(kafka.bootstrap, f"{TOPIC}-{partitions}", partitions)
        one, many = _rates(kafka.bootstrap, partitions, n, rounds)
    return PartitionsResult("kafka", n, partitions, one, many)


def rss_kb(pid: int) -> int:
    """VmRSS of process ``pid`` in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def idle_memory(partitions: int) -> MemoryResult:
    from confluent_kafka.admin import AdminClient

    with BrokerProcess() as broker:
        time.sleep(SETTLE_S)
        before = rss_kb(broker.pid)
        create_topic(broker.bootstrap, TOPIC, partitions)
        wait_topic_visible(AdminClient({"bootstrap.servers": broker.bootstrap}), TOPIC, partitions)
        time.sleep(SETTLE_S)
        after = rss_kb(broker.pid)
    return MemoryResult(partitions, before, after)
