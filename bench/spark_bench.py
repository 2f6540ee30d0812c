"""Spark pipeline throughput (not part of CI): exactly-once streaming copy in local[2] and batch read.

    .venv/bin/python bench/spark_bench.py [--records 500000] [--partitions 2]

Starts its own broker (free 127.0.0.1 port, temporary data dir), fills a topic, then measures
(1) a batch read of the whole topic (rows/s) and (2) a Structured Streaming copy with Trigger.AvailableNow into
another topic with exactly-once writes (records/s, Spark job time only: the session is warmed up first).
Goal: streaming copy >= 100k records/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.broker import BrokerProcess

GOAL_COPY = 100_000


def fill(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    from oncelog.client.sync import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions)
    value = b"x" * 100
    with Producer(bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        for i in range(n):
            p.send(topic, value, str(i).encode())
        p.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from oncelog.client.sync import Admin
    from oncelog.pipeline.spark import OncelogDataSource
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        bs = broker.bootstrap
        t0 = time.perf_counter()
        fill(bs, "bench-in", args.partitions, args.records)
        print(f"fill: {args.records / (time.perf_counter() - t0):,.0f} rec/s")
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
        print(f"batch read: {n:,} records in {dt:.2f} s = {n / dt:,.0f} rec/s")

        with Admin(bs) as admin:
            admin.create_topic("bench-out", args.partitions)
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
        rate = args.records / dt
        print(
            f"exactly-once streaming copy: {args.records:,} records in {dt:.2f} s = {rate:,.0f} rec/s "
            f"(goal >= {GOAL_COPY:,}: {'met' if rate >= GOAL_COPY else 'MISS'})"
        )
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
