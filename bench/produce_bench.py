"""Produce benchmark: oncelog vs librdkafka's mock cluster, same confluent-kafka producer settings.

1M x 100 B records (``--records``), acks=all, enable.idempotence=true, linger.ms=5, one partition.
Each peer first gets an untimed warm-up of 10% of the records (at most 100k): the broker's first requests
compile codecs and fill caches. Prints records/s against each peer, their ratio, and oncelog's CPU seconds
per 1M records
(utime+stime of the broker process from /proc/<pid>/stat). The oncelog broker is started as a subprocess
on a free 127.0.0.1 port with a temporary data dir and stopped at the end; the mock cluster runs in-process.

Usage: python bench/produce_bench.py [--records N] [--json PATH] [--peers oncelog,mock] [--set k=v ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.mock_cluster import MockCluster

RECORD_SIZE = 100
TOPIC = "bench"
DEADLINE_S = 600.0
PRODUCER_CONF = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "queue.buffering.max.messages": 1_000_000,
}


@dataclass
class Result:
    peer: str
    records: int
    seconds: float
    records_per_s: float
    broker_cpu_s: float | None = None
    broker_cpu_s_per_1m: float | None = None


def produce(
    bootstrap: str,
    n: int,
    *,
    topic: str = TOPIC,
    partitions: int = 1,
    conf: dict[str, object] | None = None,
) -> float:
    """Produce ``n`` records of RECORD_SIZE bytes to ``topic``, record i to partition i % ``partitions``, with
    PRODUCER_CONF updated by ``conf``; return seconds, first send to last ack (after one untimed ``prime`` record).
    Raises unless all were acked."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF, **(conf or {})})
    producer.list_topics(topic, timeout=10)
    payload = bytes(range(RECORD_SIZE))
    acked = 0
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked
        if err is not None:
            errors.append(str(err))
        else:
            acked += 1

    prime(producer, topic)
    start = time.perf_counter()
    for i in range(n):
        partition = i % partitions
        while True:
            try:
                producer.produce(topic, payload, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(DEADLINE_S)
    elapsed = time.perf_counter() - start
    if left or errors or acked != n:
        raise RuntimeError(f"{left} undelivered, {acked}/{n} acked, errors: {errors[:3]}")
    return elapsed


def prime(producer: Producer, topic: str) -> None:
    """Send one record to ``topic``/0 and wait for it: connects, and makes an idempotent producer fetch its producer
    id (librdkafka takes ~0.5 s for that on its first send), so the timed run measures steady-state sending."""
    errors: list[object] = []
    producer.produce(topic, b"prime", partition=0, on_delivery=lambda err, _m: errors.append(err))
    if producer.flush(30) or errors != [None]:
        raise RuntimeError(f"priming record not delivered: {errors}")


def warmup_records(n: int) -> int:
    """Records produced (and not timed) before the measured run, the same for every peer."""
    return min(max(n // 10, 1), 100_000)


def bench_oncelog(n: int, settings: dict[str, str]) -> Result:
    with BrokerProcess(settings=settings) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(timeout=20)
        produce(broker.bootstrap, warmup_records(n))
        cpu0 = broker.cpu_seconds()
        secs = produce(broker.bootstrap, n)
        cpu = broker.cpu_seconds() - cpu0
    return Result("oncelog", n, secs, n / secs, cpu, cpu * 1_000_000 / n)


def bench_mock(n: int) -> Result:
    with MockCluster(1) as mock:
        mock.create_topic(TOPIC, 1)
        produce(mock.bootstrap, warmup_records(n))
        secs = produce(mock.bootstrap, n)
    return Result("mock", n, secs, n / secs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="oncelog produce benchmark")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--peers", default="oncelog,mock", help="comma list of oncelog, mock")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="oncelog broker setting")
    args = parser.parse_args(argv)
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    settings = dict(s.split("=", 1) for s in args.set)

    results: dict[str, Result] = {}
    for peer in peers:
        if peer == "oncelog":
            results[peer] = bench_oncelog(args.records, settings)
        elif peer == "mock":
            results[peer] = bench_mock(args.records)
        else:
            parser.error(f"unknown peer {peer!r}")

    one, mock = results.get("oncelog"), results.get("mock")
    ratio = one.records_per_s / mock.records_per_s if one and mock else None

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    print(f"records={args.records} size={RECORD_SIZE}B acks=all idempotence=on linger.ms=5 partitions=1")
    print(f"{'rec/s oncelog':>14} {'rec/s mock':>12} {'ratio':>7} {'broker CPU s/1M':>16}")
    print(
        f"{fmt(one and one.records_per_s, ',.0f'):>14} {fmt(mock and mock.records_per_s, ',.0f'):>12} "
        f"{fmt(ratio, '.3f'):>7} {fmt(one and one.broker_cpu_s_per_1m, '.2f'):>16}"
    )
    if args.json:
        doc = {"results": {k: asdict(v) for k, v in results.items()}, "ratio": ratio}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
