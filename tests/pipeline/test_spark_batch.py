"""Batch reads and writes through format("oncelog") against a real broker."""

from __future__ import annotations

import json

from .helpers import new_topic, produce, read_all, values

N = 10_000


def _reader(spark, bootstrap: str, topic: str):
    return spark.read.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)


def test_batch_round_trip_10k(spark, bootstrap: str) -> None:
    topic = new_topic(bootstrap, "batch-rt", 3)
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(N)]
    df = spark.createDataFrame(rows, "key binary, value binary").repartition(4)
    (
        df.write.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )

    written = read_all(bootstrap, topic)
    assert values(written) == sorted(v for _, v in rows)

    back = _reader(spark, bootstrap, topic).load()
    assert back.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    got = back.select("key", "value", "topic", "partition", "offset").collect()
    assert len(got) == N
    assert sorted((bytes(r.key), bytes(r.value)) for r in got) == sorted(rows)
    assert {r.topic for r in got} == {topic}
    by_tp = {(r.topic, r.partition, r.offset) for r in got}
    assert len(by_tp) == N  # every record once
    assert {(r.topic, r.partition, r.offset) for r in written} == by_tp


def test_batch_read_options_and_headers(spark, bootstrap: str) -> None:
    topic = new_topic(bootstrap, "batch-opts", 2)
    produce(bootstrap, topic, 200)
    df = (
        _reader(spark, bootstrap, topic)
        .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 20, "1": -1}}))
        .load()
    )
    rows = df.collect()
    p0 = sorted(r.offset for r in rows if r.partition == 0)
    assert p0 == list(range(10, 20))
    everything = read_all(bootstrap, topic)
    assert len([r for r in rows if r.partition == 1]) == len([r for r in everything if r.partition == 1])
    row = rows[0]
    assert row.headers[0].key == "h" and bytes(row.headers[0].value) == bytes(row.value)[1:]
    assert row.timestampType == 0 and row.timestamp is not None

    assigned = (
        spark.read.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: [1]}))
        .load()
        .collect()
    )
    assert {r.partition for r in assigned} == {1}


def test_read_committed_never_shows_aborted(spark, bootstrap: str) -> None:
    topic = new_topic(bootstrap, "batch-aborted", 2)
    produce(bootstrap, topic, 100, start=0, transactional_id=f"{topic}-t", abort=False)
    produce(bootstrap, topic, 100, start=100, transactional_id=f"{topic}-t", abort=True)
    produce(bootstrap, topic, 100, start=200, transactional_id=f"{topic}-t", abort=False)
    produce(bootstrap, topic, 50, start=300)  # non-transactional
    committed = _reader(spark, bootstrap, topic).load().collect()
    want = sorted(f"v{i}".encode() for i in [*range(100), *range(200, 350)])
    assert sorted(bytes(r.value) for r in committed) == want
    uncommitted = _reader(spark, bootstrap, topic).option("kafka.isolation.level", "read_uncommitted").load()
    assert uncommitted.count() == 350
