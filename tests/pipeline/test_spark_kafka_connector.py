"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10, pinned by ``java/spark-kafka/pom.xml``)
against oncelog: batch write and read, a streaming read with ``kafka.isolation.level=read_committed`` over committed
and aborted transactions (written with confluent-kafka), and a streaming write.

The connector's sink is at least once (a retried task or a restarted query writes its rows again); ``format("oncelog")``
is the exactly-once one (docs/PIPELINE.md says when to use which)."""

from __future__ import annotations

from confluent_kafka import Producer
from pyspark.sql import functions as F

from .helpers import new_topic, produce, read_all, values

DEADLINE_S = 120


def _kafka(reader, bootstrap: str):
    return reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)


def _finish(query) -> None:
    """Wait for an ``availableNow`` query to end by itself, without error."""
    query.awaitTermination(DEADLINE_S)
    assert not query.isActive
    assert query.exception() is None


def _transaction(bootstrap: str, topic: str, tid: str, start: int, count: int, *, commit: bool) -> None:
    """One transaction of ``count`` records ``c<i>`` (committed) or ``a<i>`` (aborted) over two partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    prefix = "c" if commit else "a"
    for i in range(start, start + count):
        producer.produce(topic, value=f"{prefix}{i}".encode(), partition=i % 2)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def test_batch_write_and_read(spark, bootstrap: str) -> None:
    topic = new_topic(bootstrap, "kc-batch", 3)
    rows = spark.range(500).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.array(F.struct(F.lit("h").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))).alias(
            "headers"
        ),
    )
    _kafka(rows.write, bootstrap).option("topic", topic).option("includeHeaders", "true").save()

    written = read_all(bootstrap, topic)
    assert values(written) == sorted(f"v{i}".encode() for i in range(500))

    back = _kafka(spark.read, bootstrap).option("subscribe", topic).option("includeHeaders", "true").load()
    got = back.select("key", "value", "topic", "partition", "offset", "headers").collect()
    assert sorted(r.value for r in got) == values(written)
    assert {r.key: r.value for r in got} == {f"k{i}".encode(): f"v{i}".encode() for i in range(500)}
    assert all(r.topic == topic for r in got)
    assert all([(h.key, h.value) for h in r.headers] == [("h", r.value[1:])] for r in got)
    # Offsets are dense per partition (no transaction here): 0..n-1 on each.
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert all(sorted(o) == list(range(len(o))) for o in by_partition.values())

    # A bounded range by offsets: the first 10 records of partition 0.
    ranged = (
        _kafka(spark.read, bootstrap)
        .option("assign", f'{{"{topic}":[0]}}')
        .option("startingOffsets", f'{{"{topic}":{{"0":0}}}}')
        .option("endingOffsets", f'{{"{topic}":{{"0":10}}}}')
        .load()
        .collect()
    )
    assert sorted(r.offset for r in ranged) == list(range(10))


def test_streaming_read_committed_never_shows_aborted(spark, bootstrap: str, tmp_path) -> None:
    topic = new_topic(bootstrap, "kc-txn", 2)
    tid = f"{topic}-t"
    _transaction(bootstrap, topic, tid, 0, 60, commit=True)
    _transaction(bootstrap, topic, tid, 60, 40, commit=False)
    produce(bootstrap, topic, 20, start=100)  # non-transactional v100..v119 between the transactions
    _transaction(bootstrap, topic, tid, 120, 60, commit=True)
    _transaction(bootstrap, topic, tid, 180, 40, commit=False)  # the log ends in an aborted transaction

    stream = (
        _kafka(spark.readStream, bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    query = (
        stream.select("value")
        .writeStream.format("memory")
        .queryName("kc_read_committed")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    _finish(query)
    seen = sorted(r.value for r in spark.sql("select value from kc_read_committed").collect())
    expected = sorted(
        [f"c{i}".encode() for i in [*range(0, 60), *range(120, 180)]] + [f"v{i}".encode() for i in range(100, 120)]
    )
    assert seen == expected  # every committed and plain record once, no aborted one
    assert len(read_all(bootstrap, topic, isolation="read_uncommitted")) == 220  # the aborted ones are there


def test_streaming_write(spark, bootstrap: str, tmp_path) -> None:
    source, dest = new_topic(bootstrap, "kc-src", 2), new_topic(bootstrap, "kc-dst", 2)
    produce(bootstrap, source, 400)
    query = (
        _kafka(spark.readStream, bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", F.upper(F.col("value").cast("string")).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dest)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    _finish(query)
    # At least once in general; in a run without failures, each record exactly once.
    assert values(read_all(bootstrap, dest)) == sorted(f"V{i}".encode() for i in range(400))
