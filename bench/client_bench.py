"""Bundled client throughput vs aiokafka and confluent-kafka against the same oncelog broker, in one run.

N x 100 B records (``--records``, default 200k) to a 3-partition topic with acks=all and idempotence, linger 5 ms,
batch 64 KiB; then a full read of the topic. Each client gets its own topic. The producer's time runs from the
first send to the last acknowledgement; the consumer's from the first fetch to the N-th record. Prints records/s
per client and phase: oncelog's async client on asyncio and on trio, its blocking facade (``oncelog.client.sync``,
send() per record and flush(); iteration record by record) on both, aiokafka, and confluent-kafka (produce() per
record and flush(); consume() in lists), each with the CPU its process spent per record (all its threads, so
librdkafka's too): a figure the load of a shared machine disturbs less than records/s. Goal: facade produce
>= 0.8 of the async client's records/s (same backend).

Usage: python bench/client_bench.py [--records N] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
import confluent_kafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from oncelog.client import Admin, Consumer, Producer, TopicPartition, sync

from tests.support.broker import BrokerProcess

VALUE = b"x" * 100
PARTITIONS = 3
BATCH = 65536
Timings = tuple[float, float, float, float]  # produce s, consume s, and the process CPU s of each (all its threads)
FACADE_GOAL = 0.8  # facade produce rec/s / async client produce rec/s


async def oncelog_run(bootstrap: str, topic: str, n: int) -> Timings:
    await create_topic(bootstrap, topic)
    async with Producer(bootstrap, linger_ms=5, batch_size=BATCH) as p:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            await p.send(topic, VALUE, partition=i % PARTITIONS)
        await p.flush()
        produce_s, produce_cpu = time.perf_counter() - start, time.process_time() - cpu
    async with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10000) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        start, cpu, seen = time.perf_counter(), time.process_time(), 0
        while seen < n:
            seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000)).values())
        consume_s, consume_cpu = time.perf_counter() - start, time.process_time() - cpu
    return produce_s, consume_s, produce_cpu, consume_cpu


async def aiokafka_run(bootstrap: str, topic: str, n: int) -> Timings:
    await create_topic(bootstrap, topic)
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5, max_batch_size=BATCH
    )
    await p.start()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        futures = [await p.send(topic, VALUE, partition=i % PARTITIONS) for i in range(n)]
        await p.flush()
        await asyncio.gather(*futures)
        produce_s, produce_cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        c.assign([AioTP(topic, p) for p in range(PARTITIONS)])
        start, cpu, seen = time.perf_counter(), time.process_time(), 0
        while seen < n:
            seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000, max_records=10000)).values())
        consume_s, consume_cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await c.stop()
    return produce_s, consume_s, produce_cpu, consume_cpu


def facade_run(bootstrap: str, topic: str, n: int, backend: str) -> Timings:
    with sync.Admin(bootstrap, backend=backend) as admin:
        admin.create_topic(topic, PARTITIONS)
    with sync.Producer(bootstrap, linger_ms=5, batch_size=BATCH, backend=backend) as p:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            p.send(topic, VALUE, partition=i % PARTITIONS)
        p.flush()
        produce_s, produce_cpu = time.perf_counter() - start, time.process_time() - cpu
    with sync.Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10000, backend=backend) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        start, cpu = time.perf_counter(), time.process_time()
        for seen, _record in enumerate(c, 1):
            if seen == n:
                break
        consume_s, consume_cpu = time.perf_counter() - start, time.process_time() - cpu
    return produce_s, consume_s, produce_cpu, consume_cpu


def confluent_run(bootstrap: str, topic: str, n: int) -> Timings:
    anyio.run(create_topic, bootstrap, topic)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": BATCH,
        }
    )
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then retry
                p.poll(0.05)
        p.poll(0)
    if p.flush(60) or failed:
        raise RuntimeError(f"confluent-kafka: {len(failed)} records failed")
    produce_s, produce_cpu = time.perf_counter() - start, time.process_time() - cpu
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False}
    )
    try:
        c.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        start, cpu, seen = time.perf_counter(), time.process_time(), 0
        while seen < n:
            seen += sum(1 for m in c.consume(10000, timeout=1.0) if m.error() is None)
        consume_s, consume_cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        c.close()
    return produce_s, consume_s, produce_cpu, consume_cpu


async def create_topic(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, PARTITIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1, help="run every client N times, keep each phase's best")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = args.records
    best: dict[str, Timings] = {}
    with BrokerProcess(settings={"log.flush.interval.messages": 1}) as broker:
        runs = [
            ("oncelog-asyncio", lambda t: anyio.run(oncelog_run, broker.bootstrap, t, n)),
            ("oncelog-trio", lambda t: anyio.run(oncelog_run, broker.bootstrap, t, n, backend="trio")),
            ("oncelog-sync-asyncio", lambda t: facade_run(broker.bootstrap, t, n, "asyncio")),
            ("oncelog-sync-trio", lambda t: facade_run(broker.bootstrap, t, n, "trio")),
            ("aiokafka", lambda t: asyncio.run(aiokafka_run(broker.bootstrap, t, n))),
            ("confluent-kafka", lambda t: confluent_run(broker.bootstrap, t, n)),
        ]
        for r in range(args.rounds):  # rounds interleave the clients, so a busy spell of the machine hits them all
            for name, fn in runs:
                got = fn(f"bench-{name}-{r}")
                prev = best.get(name, got)
                produce = min((prev[0], prev[2]), (got[0], got[2]))  # each phase's fastest round, with its CPU
                consume = min((prev[1], prev[3]), (got[1], got[3]))
                best[name] = (produce[0], consume[0], produce[1], consume[1])
    results = []
    for name, (produce_s, consume_s, produce_cpu, consume_cpu) in best.items():
        row = {
            "client": name,
            "records": n,
            "produce_s": round(produce_s, 3),
            "produce_rps": round(n / produce_s),
            "produce_cpu_us_per_record": round(produce_cpu / n * 1e6, 2),
            "consume_s": round(consume_s, 3),
            "consume_rps": round(n / consume_s),
            "consume_cpu_us_per_record": round(consume_cpu / n * 1e6, 2),
        }
        results.append(row)
        print(
            f"{name:20s} produce {row['produce_rps']:>9,} rec/s {row['produce_cpu_us_per_record']:5.1f} us CPU/rec"
            f"   consume {row['consume_rps']:>9,} rec/s {row['consume_cpu_us_per_record']:5.1f} us CPU/rec"
        )
    rps = {row["client"]: row["produce_rps"] for row in results}
    cpus = {row["client"]: row["produce_cpu_us_per_record"] for row in results}
    for backend in ("asyncio", "trio"):
        ratio = rps[f"oncelog-sync-{backend}"] / rps[f"oncelog-{backend}"]
        cpu = cpus[f"oncelog-sync-{backend}"] / cpus[f"oncelog-{backend}"]
        verdict = "met" if ratio >= FACADE_GOAL else "MISS"
        print(
            f"facade / async produce ({backend}): {ratio:.2f} of the records/s (goal >= {FACADE_GOAL}: {verdict}), "
            f"{cpu:.2f}x the CPU per record"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
