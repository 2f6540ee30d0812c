"""Exactly-once Structured Streaming pipeline: read a topic (read_committed), transform, write another topic.

    python examples/spark_copy.py --bootstrap 127.0.0.1:9092 --input orders --output orders-upper \\
        --checkpoint /tmp/spark-copy-ck [--available-now] [--max-offsets-per-trigger 10000]

Each output record is the input record's value upper-cased, under the same key, with the same headers. Stop it at
any point (Ctrl-C, kill -9) and start it again with the same --checkpoint: a read_committed reader of the output
sees every input record's result exactly once. Needs the ``spark`` extra and Java 17 (JAVA_HOME).
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from oncelog.pipeline.spark import OncelogDataSource
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(args.master)
        .appName("oncelog-spark-copy")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OncelogDataSource)

    reader = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    upper = F.upper(F.col("value").cast("string")).cast("binary")
    out = reader.load().select("key", upper.alias("value"), "headers")
    writer = (
        out.writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
