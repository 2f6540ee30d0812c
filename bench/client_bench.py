"""Bundled client throughput vs aiokafka and confluent-kafka against the same oncelog broker, in one run.

N x 100 B records (``--records``, default 1M) to a 3-partition topic with acks=all and idempotence, linger 5 ms,
batch 64 KiB; then two full reads of the topic, read_uncommitted ("consume") and read_committed ("consume_rc").
Each client gets its own topic. The producer's time runs from the first send to the last acknowledgement; each
read's from the first fetch to the N-th record. Prints records/s per client and phase: oncelog's async client on
asyncio and on trio, the same with its pure-Python record decoder (``-pure``: the fallback where aiokafka's compiled
reader is missing), its blocking facade (``oncelog.client.sync``, send() per record and flush(); iteration record
by record) on both backends, aiokafka, and confluent-kafka (produce() per record and flush(); consume() in lists),
each with the CPU its process spent per record (all its threads, so librdkafka's too): a figure the load of a shared
machine disturbs less than records/s. Goals: the async client's produce and consume records/s >= aiokafka's, on
both backends and isolation levels; facade produce >= 0.8 of the async client's records/s (same backend).

Usage: python bench/client_bench.py [--records N] [--rounds N] [--only NAME,...] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
import confluent_kafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from oncelog.client import Admin, Consumer, Producer, TopicPartition, sync

try:
    from oncelog.client import record_decode
except ImportError:  # a tree from before the compiled decoder (to measure "before" with this script): no -pure runs
    record_decode = None  # type: ignore[assignment]

from tests.support.broker import BrokerProcess

VALUE = b"x" * 100
PARTITIONS = 3
BATCH = 65536
PHASES = ("produce", "consume", "consume_rc")
ISOLATION = {"consume": "read_uncommitted", "consume_rc": "read_committed"}
Timing = tuple[float, float]  # seconds, and the process CPU seconds (all its threads)
Timings = dict[str, Timing]  # by phase
FACADE_GOAL = 0.8  # facade produce rec/s / async client produce rec/s
PEER = "aiokafka"  # the async client's goal: at least this client's records/s in every phase


class Stopwatch:
    """Wall and process CPU time from creation to :meth:`stop`."""

    def __init__(self) -> None:
        self.start, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> Timing:
        return time.perf_counter() - self.start, time.process_time() - self.cpu


@contextmanager
def pure_records(pure: bool) -> Iterator[None]:
    """Decode fetched records with the pure-Python decoder inside (when ``pure``), the chosen one otherwise."""
    if record_decode is None:
        yield
        return
    before = record_decode.decoder()
    record_decode._chosen = record_decode.decode_pure if pure else before
    try:
        yield
    finally:
        record_decode._chosen = before


async def oncelog_run(bootstrap: str, topic: str, n: int, pure: bool = False) -> Timings:
    await create_topic(bootstrap, topic)
    out: Timings = {}
    async with Producer(bootstrap, linger_ms=5, batch_size=BATCH) as p:
        watch = Stopwatch()
        for i in range(n):
            await p.send(topic, VALUE, partition=i % PARTITIONS)
        await p.flush()
        out["produce"] = watch.stop()
    for phase, isolation in ISOLATION.items():
        with pure_records(pure):
            async with Consumer(
                bootstrap, auto_offset_reset="earliest", max_poll_records=10000, isolation_level=isolation
            ) as c:
                c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
                watch, seen = Stopwatch(), 0
                while seen < n:
                    seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000)).values())
                out[phase] = watch.stop()
    return out


async def aiokafka_run(bootstrap: str, topic: str, n: int) -> Timings:
    await create_topic(bootstrap, topic)
    out: Timings = {}
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5, max_batch_size=BATCH
    )
    await p.start()
    try:
        watch = Stopwatch()
        futures = [await p.send(topic, VALUE, partition=i % PARTITIONS) for i in range(n)]
        await p.flush()
        await asyncio.gather(*futures)
        out["produce"] = watch.stop()
    finally:
        await p.stop()
    for phase, isolation in ISOLATION.items():
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level=isolation,
        )
        await c.start()
        try:
            c.assign([AioTP(topic, p) for p in range(PARTITIONS)])
            watch, seen = Stopwatch(), 0
            while seen < n:
                seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000, max_records=10000)).values())
            out[phase] = watch.stop()
        finally:
            await c.stop()
    return out


def facade_run(bootstrap: str, topic: str, n: int, backend: str) -> Timings:
    with sync.Admin(bootstrap, backend=backend) as admin:
        admin.create_topic(topic, PARTITIONS)
    out: Timings = {}
    with sync.Producer(bootstrap, linger_ms=5, batch_size=BATCH, backend=backend) as p:
        watch = Stopwatch()
        for i in range(n):
            p.send(topic, VALUE, partition=i % PARTITIONS)
        p.flush()
        out["produce"] = watch.stop()
    for phase, isolation in ISOLATION.items():
        with sync.Consumer(
            bootstrap,
            auto_offset_reset="earliest",
            max_poll_records=10000,
            isolation_level=isolation,
            backend=backend,
        ) as c:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            watch = Stopwatch()
            for seen, _record in enumerate(c, 1):
                if seen == n:
                    break
            out[phase] = watch.stop()
    return out


def confluent_run(bootstrap: str, topic: str, n: int) -> Timings:
    anyio.run(create_topic, bootstrap, topic)
    out: Timings = {}
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

    watch = Stopwatch()
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
    out["produce"] = watch.stop()
    for phase, isolation in ISOLATION.items():
        c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{topic}-{phase}",
                "enable.auto.commit": False,
                "isolation.level": isolation,  # librdkafka's default is read_committed: always say which
            }
        )
        try:
            c.assign(
                [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)]
            )
            watch, seen = Stopwatch(), 0
            while seen < n:
                seen += sum(1 for m in c.consume(10000, timeout=1.0) if m.error() is None)
            out[phase] = watch.stop()
        finally:
            c.close()
    return out


async def create_topic(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, PARTITIONS)


def clients(bootstrap: str, n: int) -> dict[str, Callable[[str], Timings]]:
    runs: dict[str, Callable[[str], Timings]] = {
        "oncelog-asyncio": lambda t: anyio.run(oncelog_run, bootstrap, t, n),
        "oncelog-trio": lambda t: anyio.run(oncelog_run, bootstrap, t, n, backend="trio"),
        "oncelog-asyncio-pure": lambda t: anyio.run(oncelog_run, bootstrap, t, n, True),
        "oncelog-trio-pure": lambda t: anyio.run(oncelog_run, bootstrap, t, n, True, backend="trio"),
        "oncelog-sync-asyncio": lambda t: facade_run(bootstrap, t, n, "asyncio"),
        "oncelog-sync-trio": lambda t: facade_run(bootstrap, t, n, "trio"),
        "aiokafka": lambda t: asyncio.run(aiokafka_run(bootstrap, t, n)),
        "confluent-kafka": lambda t: confluent_run(bootstrap, t, n),
    }
    if record_decode is None:
        del runs["oncelog-asyncio-pure"], runs["oncelog-trio-pure"]
    return runs


def measure(n: int, rounds: int = 1, only: list[str] | None = None) -> dict[str, Timings]:
    """Each client's fastest round per phase (and its CPU), ``n`` records, against one broker started here."""
    best: dict[str, Timings] = {}
    with BrokerProcess(settings={"log.flush.interval.messages": 1}) as broker:
        runs = clients(broker.bootstrap, n)
        if only:
            runs = {name: runs[name] for name in only}
        for r in range(rounds):  # rounds interleave the clients, so a busy spell of the machine hits them all
            for name, fn in runs.items():
                got = fn(f"bench-{name}-{r}")
                prev = best.setdefault(name, got)
                best[name] = {phase: min(prev[phase], got[phase]) for phase in PHASES}  # fastest round, its CPU
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1, help="run every client N times, keep each phase's best")
    parser.add_argument("--only", default=None, help="comma-separated client names (default: all)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = args.records
    best = measure(n, args.rounds, args.only.split(",") if args.only else None)
    results = []
    for name, timings in best.items():
        row: dict[str, object] = {"client": name, "records": n}
        line = f"{name:21s}"
        for phase in PHASES:
            secs, cpu = timings[phase]
            row[f"{phase}_s"] = round(secs, 3)
            row[f"{phase}_rps"] = round(n / secs)
            row[f"{phase}_cpu_us_per_record"] = round(cpu / n * 1e6, 2)
            line += f"  {phase} {n / secs:>9,.0f} rec/s {cpu / n * 1e6:4.1f} us CPU"
        results.append(row)
        print(line)
    rows = {row["client"]: row for row in results}
    for backend in ("asyncio", "trio"):
        ours = rows.get(f"oncelog-{backend}")
        if ours is None:
            continue
        if PEER in rows:
            ratios = [f"{phase} {ours[f'{phase}_rps'] / rows[PEER][f'{phase}_rps']:.2f}" for phase in PHASES]  # type: ignore[operator]
            print(f"oncelog-{backend} / {PEER} records/s: {', '.join(ratios)} (goal >= 1.0)")
        facade = rows.get(f"oncelog-sync-{backend}")
        if facade is not None:
            ratio = facade["produce_rps"] / ours["produce_rps"]  # type: ignore[operator]
            cpu = facade["produce_cpu_us_per_record"] / ours["produce_cpu_us_per_record"]  # type: ignore[operator]
            verdict = "met" if ratio >= FACADE_GOAL else "MISS"
            print(
                f"facade / async produce ({backend}): {ratio:.2f} of the records/s (goal >= {FACADE_GOAL}: {verdict}), "
                f"{cpu:.2f}x the CPU per record"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
