"""Structured Streaming through format("oncelog"): exactly-once copies across reruns, replays and task failures."""

from __future__ import annotations

import os
import shutil

from pyspark.sql import functions as F

from .helpers import new_topic, produce, read_all, values


def _copy(spark, bootstrap: str, source: str, dest: str, checkpoint: str, *, transform=None, **options) -> None:
    df = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    df = transform(df) if transform is not None else df.select("key", "value", "headers")
    query = (
        df.writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dest)
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert query.exception() is None


def test_available_now_twice_on_one_checkpoint(spark, bootstrap: str, tmp_path) -> None:
    source, dest = new_topic(bootstrap, "s-in", 3), new_topic(bootstrap, "s-out", 2)
    produce(bootstrap, source, 3000)
    checkpoint = str(tmp_path / "ck")
    _copy(spark, bootstrap, source, dest, checkpoint)
    first = read_all(bootstrap, dest)
    assert values(first) == values(read_all(bootstrap, source))
    assert first[0].headers == (("h", first[0].value[1:]),)  # the bundled client: a tuple of pairs

    _copy(spark, bootstrap, source, dest, checkpoint)  # nothing new: adds nothing
    assert len(read_all(bootstrap, dest)) == 3000

    produce(bootstrap, source, 500, start=3000)
    _copy(spark, bootstrap, source, dest, checkpoint)  # only the new records
    assert values(read_all(bootstrap, dest)) == sorted(f"v{i}".encode() for i in range(3500))


def test_replayed_batch_writes_nothing(spark, bootstrap: str, tmp_path) -> None:
    """The driver died after the transactions committed but before Spark recorded the batch as done: Spark
    replays the batch, the tasks find their markers and write nothing."""
    source, dest = new_topic(bootstrap, "r-in", 2), new_topic(bootstrap, "r-out", 2)
    produce(bootstrap, source, 1000)
    checkpoint = str(tmp_path / "ck")
    _copy(spark, bootstrap, source, dest, checkpoint)
    commits = os.path.join(checkpoint, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    os.remove(os.path.join(commits, str(last)))  # forget that the batch committed
    for crc in os.listdir(commits):
        if crc.startswith(f".{last}."):
            os.remove(os.path.join(commits, crc))
    _copy(spark, bootstrap, source, dest, checkpoint)
    assert values(read_all(bootstrap, dest)) == sorted(f"v{i}".encode() for i in range(1000))
    assert os.path.exists(os.path.join(commits, str(last)))  # it was replayed


def _fail_first_attempt(df):
    """A transform that makes the write task fail on its first attempt, mid-transaction: on attempt 0 the row at
    offset 600 asks for partition 99, which the output topic lacks, so the writer's send raises after the rows
    before it went out."""

    @F.udf("int", useArrow=False)
    def bad_partition(offset: int):
        import time

        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0 and offset == 600:
            time.sleep(1.5)  # the writer's producer sends the earlier rows meanwhile
            return 99
        return None

    return df.select("key", "value", bad_partition("offset").alias("partition"))


def test_task_failing_first_attempt_no_duplicate(spark, bootstrap: str, tmp_path) -> None:
    """Every run must copy exactly once. Whether the failed attempt's rows reach the broker before its send of the
    bad row raises is a race (its producer may still wait for AddPartitionsToTxn when the abort drops unsent
    batches), so the scenario is run up to five times until one failed attempt really wrote into a transaction
    that was then aborted."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")  # the writer sees rows before the failure
    wrote_and_aborted = False
    try:
        for run in range(5):
            source, dest = new_topic(bootstrap, "f-in", 1), new_topic(bootstrap, "f-out", 1)
            produce(bootstrap, source, 1200)
            _copy(
                spark,
                bootstrap,
                source,
                dest,
                str(tmp_path / f"ck{run}"),
                transform=_fail_first_attempt,
                **{"kafka.linger.ms": "0"},
            )
            assert values(read_all(bootstrap, dest)) == values(read_all(bootstrap, source))
            if len(read_all(bootstrap, dest, isolation="read_uncommitted")) > 1200:
                wrote_and_aborted = True
                break
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert wrote_and_aborted, "no failed attempt wrote anything before failing, in 5 runs"


def test_stream_read_committed_skips_aborted(spark, bootstrap: str, tmp_path) -> None:
    source, dest = new_topic(bootstrap, "a-in", 2), new_topic(bootstrap, "a-out", 2)
    produce(bootstrap, source, 300, start=0, transactional_id=f"{source}-t")
    produce(bootstrap, source, 300, start=300, transactional_id=f"{source}-t", abort=True)
    produce(bootstrap, source, 300, start=600, transactional_id=f"{source}-t")
    _copy(spark, bootstrap, source, dest, str(tmp_path / "ck"))
    want = sorted(f"v{i}".encode() for i in [*range(300), *range(600, 900)])
    assert values(read_all(bootstrap, dest)) == want
    assert values(read_all(bootstrap, dest, isolation="read_uncommitted")) == want
    shutil.rmtree(tmp_path / "ck")
