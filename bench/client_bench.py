"""Bundled client throughput vs aiokafka against the same oncelog broker, in one run.

N x 100 B records (``--records``, default 200k) to a 3-partition topic with acks=all and idempotence, linger 5 ms,
batch 64 KiB; then a full read of the topic. Each client gets its own topic. The producer's time runs from the
first send to the last acknowledgement; the consumer's from the first fetch to the N-th record. Prints records/s
per client and phase (oncelog's client on asyncio and on trio).

Usage: python bench/client_bench.py [--records N] [--json PATH]
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
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from oncelog.client import Admin, Consumer, Producer, TopicPartition

from tests.support.broker import BrokerProcess

VALUE = b"x" * 100
PARTITIONS = 3
BATCH = 65536


async def oncelog_run(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, PARTITIONS)
    async with Producer(bootstrap, linger_ms=5, batch_size=BATCH) as p:
        start = time.perf_counter()
        for i in range(n):
            await p.send(topic, VALUE, partition=i % PARTITIONS)
        await p.flush()
        produce_s = time.perf_counter() - start
    async with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=10000) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        start, seen = time.perf_counter(), 0
        while seen < n:
            seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000)).values())
        consume_s = time.perf_counter() - start
    return produce_s, consume_s


async def aiokafka_run(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, PARTITIONS)
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5, max_batch_size=BATCH
    )
    await p.start()
    try:
        start = time.perf_counter()
        futures = [await p.send(topic, VALUE, partition=i % PARTITIONS) for i in range(n)]
        await p.flush()
        await asyncio.gather(*futures)
        produce_s = time.perf_counter() - start
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        c.assign([AioTP(topic, p) for p in range(PARTITIONS)])
        start, seen = time.perf_counter(), 0
        while seen < n:
            seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000, max_records=10000)).values())
        consume_s = time.perf_counter() - start
    finally:
        await c.stop()
    return produce_s, consume_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = args.records
    results = []
    with BrokerProcess(settings={"log.flush.interval.messages": 1}) as broker:
        runs = [
            ("oncelog-asyncio", lambda t: anyio.run(oncelog_run, broker.bootstrap, t, n)),
            ("oncelog-trio", lambda t: anyio.run(oncelog_run, broker.bootstrap, t, n, backend="trio")),
            ("aiokafka", lambda t: asyncio.run(aiokafka_run(broker.bootstrap, t, n))),
        ]
        for name, fn in runs:
            produce_s, consume_s = fn(f"bench-{name}")
            row = {
                "client": name,
                "records": n,
                "produce_s": round(produce_s, 3),
                "produce_rps": round(n / produce_s),
                "consume_s": round(consume_s, 3),
                "consume_rps": round(n / consume_s),
            }
            results.append(row)
            print(f"{name:16s} produce {row['produce_rps']:>9,} rec/s   consume {row['consume_rps']:>9,} rec/s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
