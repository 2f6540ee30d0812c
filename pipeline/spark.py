"""PySpark data source ``format("oncelog")``: batch and streaming reads (read_committed by default) and
exactly-once batch and streaming writes. Needs pyspark >= 4.1 and pyarrow (the ``spark`` extra).

    from oncelog.pipeline.spark import OncelogDataSource
    spark.dataSource.register(OncelogDataSource)
    df = spark.readStream.format("oncelog").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "in").load()

Rows and option names follow Spark's Kafka integration (see docs/PIPELINE.md). Guarantees: reads return each
record of the planned offset ranges once, never a control record and (read_committed) never aborted or open
transactional data; writes are exactly once per (query, batch, Spark partition) as described in
``oncelog.pipeline.txn_task`` and docs/PIPELINE.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncelog.pipeline.options import SinkOptions, SourceOptions
from oncelog.pipeline.stage_log import stage
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

if TYPE_CHECKING:  # Spark starts a fresh Python process to plan a write, another for each batch's commit and one
    # per query for the source: each imports only what its own call needs (the client for offsets and commits, never
    # pyarrow or numpy, which the executor halves import when they run).
    import pyarrow as pa
    from oncelog.pipeline import offsets as off
    from oncelog.pipeline.txn_end import TaskCommit

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark sets on every micro-batch job

# Spark starts executor Python workers with PYSPARK_PYTHON (default: "python3" on PATH), which may lack oncelog.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _ranges(start: off.Offsets, end: off.Offsets) -> list[InputPartition]:
    """One input partition (value: an OffsetRange) per topic-partition with offsets in [start, end)."""
    from oncelog.pipeline.offsets import OffsetRange

    return [
        InputPartition(OffsetRange(tp.topic, tp.partition, start.get(tp, end[tp]), end[tp]))
        for tp in sorted(end)
        if end[tp] > start.get(tp, end[tp])
    ]


def _snapshot(opts: SourceOptions, call: str) -> off.Snapshot:
    """``offsets.snapshot`` as a driver stage named after the data source method that needs it."""
    from oncelog.pipeline import offsets

    with stage("driver", call=call, new_snapshot=True):
        return offsets.snapshot(opts)


def _noting_end(batches: Iterator[pa.RecordBatch], fields: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    """``batches``, noting in a stage's ``fields`` when the input ended (``input_end``, epoch seconds): what a
    write task does after it is its own tail (flush, marker)."""
    yield from batches
    fields["input_end"] = time.time()


def _read(opts: SourceOptions, rng: off.OffsetRange) -> Iterator[pa.RecordBatch]:
    from oncelog.pipeline.range_reader import read_range

    with stage("read", partition=rng.partition, offsets=rng.end - rng.start) as fields:
        rows = 0
        for batch in read_range(opts.bootstrap, rng, isolation=opts.isolation, timeout_ms=opts.read_timeout_ms):
            rows += batch.num_rows
            yield batch
        fields["rows"] = rows


class OncelogBatchReader(DataSourceReader):
    """Batch read: offsets resolved once on the driver; one input partition per non-empty topic-partition."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        snap = _snapshot(self.opts, "partitions")
        start = snap.resolve(self.opts.starting)
        end = snap.resolve(self.opts.ending)
        return _ranges({tp: start.get(tp, snap.earliest[tp]) for tp in end}, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition.value)


class OncelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read: offsets are ``{topic: {partition: offset}}``; ``latestOffset`` honours ReadMaxRows
    (maxOffsetsPerTrigger); partitions that appear later start at their earliest offset. With
    Trigger.AvailableNow the target is the latest offsets when the query starts (in maxOffsetsPerTrigger steps).

    One reader serves one query run (Spark's source runner process). The snapshot ``prepareForTriggerAvailableNow``
    takes also answers the ``initialOffset`` and the first ``latestOffset`` calls that follow it at the query's start
    (Spark makes them within milliseconds); every later ``latestOffset`` takes a fresh snapshot, so partitions created
    meanwhile are found. ``initialOffset`` answers the same position each time it is asked."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.target: off.Offsets | None = None
        self._start_snapshot: off.Snapshot | None = None  # prepareForTriggerAvailableNow's, until latestOffset
        self._initial: dict | None = None

    def _snapshot(self, call: str, *, last_reuse: bool = False) -> off.Snapshot:
        snap = self._start_snapshot
        if snap is None:
            return _snapshot(self.opts, call)
        if last_reuse:
            self._start_snapshot = None
        with stage("driver", call=call, new_snapshot=False):
            return snap

    def prepareForTriggerAvailableNow(self) -> None:
        snap = _snapshot(self.opts, "prepareForTriggerAvailableNow")
        self.target, self._start_snapshot = snap.latest, snap

    def initialOffset(self) -> dict:
        if self._initial is None:
            from oncelog.pipeline.offsets import to_json

            snap = self._snapshot("initialOffset")
            starting = snap.resolve(self.opts.starting)
            self._initial = to_json(starting | {tp: snap.earliest[tp] for tp in snap.latest if tp not in starting})
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from oncelog.pipeline.offsets import from_json, limit_rows, to_json

        snap = self._snapshot("latestOffset", last_reuse=True)
        begin = from_json(start)
        begin |= {tp: snap.earliest[tp] for tp in snap.latest if tp not in begin}
        available = self.target if self.target is not None else snap.latest
        latest = {tp: max(available.get(tp, begin[tp]), begin[tp]) for tp in snap.latest}
        if isinstance(limit, ReadMaxRows):
            latest = limit_rows(begin, latest, limit.max_rows)
        return to_json(begin | latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        from oncelog.pipeline.offsets import from_json

        return _ranges(from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint (offsets are not committed to a group)."""


class _ExactlyOnceWriter:
    """Shared by the batch and the streaming writer: tasks leave transactions open, the driver ends them.

    Spark builds the writer on the driver in a fresh Python process to plan the write, and again in the process of
    every commit: building it does no I/O and imports no client (a task creates the marker topic when it finds no
    marker, ``txn_task.write_task``)."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink

    def _write(self, batches: Iterator[pa.RecordBatch], batch_id: int | None) -> TaskCommit:
        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        if batch_id is None:
            prop = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
            batch_id = int(prop) if prop is not None else 0
        from oncelog.pipeline.txn_task import write_task

        with stage("write", partition=partition_id, batch=batch_id) as fields:
            result = write_task(self.sink, partition_id, batch_id, _noting_end(batches, fields))
            fields["rows"] = result.rows
        return result

    def _commit(self, messages: Sequence[TaskCommit | None]) -> None:
        from oncelog.pipeline.txn_end import commit_batch

        with stage("commit", tasks=len(messages)):
            commit_batch(self.sink, messages)

    def _abort(self, messages: Sequence[TaskCommit | None]) -> None:
        # Best effort: a transaction that cannot be aborted here is aborted by the next attempt of its
        # partition (init_transactions) or by the broker after transaction.timeout.ms.
        from oncelog.client import KafkaError
        from oncelog.pipeline.txn_end import end_transactions

        with contextlib.suppress(KafkaError):
            end_transactions(self.sink.bootstrap, messages, commit=False)


class OncelogBatchWriter(_ExactlyOnceWriter, DataSourceArrowWriter):
    """Batch write (append): every task's rows in one transaction, all committed by the driver after the job."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return _Message(self._write(iterator, 0))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        self._commit([_unwrap(m) for m in messages])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        self._abort([_unwrap(m) for m in messages])


class OncelogStreamWriter(_ExactlyOnceWriter, DataSourceStreamArrowWriter):
    """Micro-batch write: one transaction per (batch, Spark partition), committed by the driver per batch."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return _Message(self._write(iterator, None))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        self._commit([_unwrap(m) for m in messages])

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        self._abort([_unwrap(m) for m in messages])


@dataclass(frozen=True)
class _Message(WriterCommitMessage):
    task: TaskCommit


def _unwrap(message: WriterCommitMessage | None) -> TaskCommit | None:
    return message.task if isinstance(message, _Message) else None


class OncelogDataSource(DataSource):
    """``format("oncelog")``: register with ``spark.dataSource.register(OncelogDataSource)``."""

    @classmethod
    def name(cls) -> str:
        return "oncelog"

    def schema(self) -> str:
        from oncelog.pipeline.rows import SCHEMA_DDL

        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return OncelogBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OncelogStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> OncelogBatchWriter:  # type: ignore[override]
        return OncelogBatchWriter(SinkOptions.parse(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> OncelogStreamWriter:  # type: ignore[override]
        return OncelogStreamWriter(SinkOptions.parse(self.options, streaming=True))


def register(spark: Any) -> None:
    """``spark.dataSource.register(OncelogDataSource)``."""
    spark.dataSource.register(OncelogDataSource)
