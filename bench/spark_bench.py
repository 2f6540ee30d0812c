"""Spark pipeline throughput (not part of CI): exactly-once streaming copy in local[2] and batch read.

    .venv/bin/python bench/spark_bench.py [--records 500000] [--partitions 2]

Starts its own broker (free 127.0.0.1 port, temporary data dir), fills a topic, then measures
(1) a batch read of the whole topic (rows/s) and (2) a Structured Streaming copy with Trigger.AvailableNow into
another topic with exactly-once writes (records/s, Spark job time only: the session is warmed up first).
Before Spark starts it times the Python halves alone, in this process: ``read_range`` of one partition and
``write_task`` of the same rows (records/s by wall clock and by this process's CPU time, which stays meaningful
on a loaded machine), so a slow figure can be laid on the Python side or on Spark's.
Goals: streaming copy >= 100k records/s, batch read >= 300k records/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.broker import BrokerProcess

GOAL_COPY = 100_000
GOAL_READ = 300_000


def fill(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    from oncelog.client.sync import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions)
    value = b"x" * 100
    with Producer(bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        for i in range(n):
            p.send(topic, value, str(i).encode())
        p.flush()


def python_halves(bootstrap: str, topic: str) -> dict[str, float]:
    """Time ``read_range`` of partition 0 of ``topic`` and ``write_task`` of its (key, value) rows, without Spark;
    returns records per CPU second of each (``read_range`` / ``write_task``)."""
    from oncelog.client import TopicPartition
    from oncelog.client.sync import Admin
    from oncelog.pipeline import offsets
    from oncelog.pipeline.options import SinkOptions, SourceOptions
    from oncelog.pipeline.range_reader import OffsetRange, read_range
    from oncelog.pipeline.spark import _ensure_marker_topic
    from oncelog.pipeline.txn_task import write_task

    source = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    end = offsets.snapshot(source).latest[TopicPartition(topic, 0)]
    batches = []

    def read() -> int:
        batches.extend(read_range(bootstrap, OffsetRange(topic, 0, 0, end)))
        return sum(b.num_rows for b in batches)

    with Admin(bootstrap) as admin:
        admin.create_topic("bench-halves", 1)
    sink = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": "bench-halves"}, streaming=False)
    _ensure_marker_topic(sink)
    cpu_rates: dict[str, float] = {}
    for label, run in (
        ("read_range", read),
        ("write_task", lambda: write_task(sink, 0, 0, [b.select(["key", "value"]) for b in batches]).rows),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        n = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"python {label}: {n:,} records, {n / wall:,.0f} rec/s wall, {n / cpu:,.0f} rec/s of this process's CPU")
        cpu_rates[label] = n / cpu
    return cpu_rates


@dataclass(frozen=True)
class SparkFigures:
    """One run: Spark's batch read and exactly-once streaming copy (rec/s), and the Python halves alone (rec/s of
    CPU)."""

    records: int
    read_rec_s: float
    copy_rec_s: float
    read_range_cpu_rec_s: float
    write_task_cpu_rec_s: float


def measure(records: int, partitions: int) -> SparkFigures:
    """Fill a topic of ``records`` x 100 B over ``partitions``, then time the Python halves, a batch read and an
    exactly-once streaming copy in local[2] (printing each figure as it comes)."""
    os.environ.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from oncelog.client.sync import Admin
    from oncelog.pipeline.spark import OncelogDataSource
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        bs = broker.bootstrap
        t0 = time.perf_counter()
        fill(bs, "bench-in", partitions, records)
        print(f"fill: {records / (time.perf_counter() - t0):,.0f} rec/s")
        halves = python_halves(bs, "bench-in")
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(OncelogDataSource)
        reader = spark.read.format("oncelog").option("kafka.bootstrap.servers", bs).option("subscribe", "bench-in")
        reader.load().limit(10).collect()  # warm-up: Python workers, connections
        t0 = time.perf_counter()
        n = reader.load().selectExpr("sum(length(value))").collect()[0][0] // 100
        dt = time.perf_counter() - t0
        read_rate = n / dt
        print(
            f"batch read: {n:,} records in {dt:.2f} s = {n / dt:,.0f} rec/s "
            f"(goal >= {GOAL_READ:,}: {'met' if n / dt >= GOAL_READ else 'MISS'})"
        )

        with Admin(bs) as admin:
            admin.create_topic("bench-out", partitions)
        t0 = time.perf_counter()
        q = (
            spark.readStream.format("oncelog")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "bench-in")
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value")
            .writeStream.format("oncelog")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", "bench-out")
            .option("checkpointLocation", os.path.join(tmp, "ck"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        dt = time.perf_counter() - t0
        rate = records / dt
        print(
            f"exactly-once streaming copy: {records:,} records in {dt:.2f} s = {rate:,.0f} rec/s "
            f"(goal >= {GOAL_COPY:,}: {'met' if rate >= GOAL_COPY else 'MISS'})"
        )
        spark.stop()
    return SparkFigures(records, read_rate, rate, halves["read_range"], halves["write_task"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    measure(args.records, args.partitions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
