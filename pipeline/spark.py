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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from oncelog.client import Admin, KafkaError
from oncelog.pipeline import offsets as off
from oncelog.pipeline.options import SinkOptions, SourceOptions
from oncelog.pipeline.stage_log import stage
from oncelog.pipeline.txn_end import TaskCommit, end_transactions, fence_dangling
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

if TYPE_CHECKING:  # the executor halves import pyarrow (and numpy) when they run: the driver's Python processes
    import pyarrow as pa  # (planning, commits) then start without them

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark sets on every micro-batch job

# Spark starts executor Python workers with PYSPARK_PYTHON (default: "python3" on PATH), which may lack oncelog.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _ranges(start: off.Offsets, end: off.Offsets) -> list[InputPartition]:
    """One input partition (value: an OffsetRange) per topic-partition with offsets in [start, end)."""
    return [
        InputPartition(off.OffsetRange(tp.topic, tp.partition, start.get(tp, end[tp]), end[tp]))
        for tp in sorted(end)
        if end[tp] > start.get(tp, end[tp])
    ]


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
        snap = off.snapshot(self.opts)
        start = snap.resolve(self.opts.starting)
        end = snap.resolve(self.opts.ending)
        return _ranges({tp: start.get(tp, snap.earliest[tp]) for tp in end}, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition.value)


class OncelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read: offsets are ``{topic: {partition: offset}}``; ``latestOffset`` honours ReadMaxRows
    (maxOffsetsPerTrigger); partitions that appear later start at their earliest offset. With
    Trigger.AvailableNow the target is the latest offsets when the query starts (in maxOffsetsPerTrigger steps)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.target: off.Offsets | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = off.snapshot(self.opts).latest

    def initialOffset(self) -> dict:
        snap = off.snapshot(self.opts)
        return off.to_json(
            snap.resolve(self.opts.starting)
            | {tp: snap.earliest[tp] for tp in snap.latest if tp not in snap.resolve(self.opts.starting)}
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        snap = off.snapshot(self.opts)
        begin = off.from_json(start)
        begin |= {tp: snap.earliest[tp] for tp in snap.latest if tp not in begin}
        available = self.target if self.target is not None else snap.latest
        latest = {tp: max(available.get(tp, begin[tp]), begin[tp]) for tp in snap.latest}
        if isinstance(limit, ReadMaxRows):
            latest = off.limit_rows(begin, latest, limit.max_rows)
        return off.to_json(begin | latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return _ranges(off.from_json(start), off.from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint (offsets are not committed to a group)."""


def _ensure_marker_topic(sink: SinkOptions) -> None:
    async def create() -> None:
        async with Admin(sink.bootstrap) as admin:
            if sink.marker_topic not in await admin.list_topics():
                with contextlib.suppress(KafkaError):  # TOPIC_ALREADY_EXISTS from a concurrent creator
                    await admin.create_topic(sink.marker_topic, 1)

    anyio.run(create)


class _ExactlyOnceWriter:
    """Shared by the batch and the streaming writer: tasks leave transactions open, the driver ends them."""

    def __init__(self, sink: SinkOptions) -> None:
        self.sink = sink
        _ensure_marker_topic(sink)  # Spark builds the writer on the driver (again for every commit): no other I/O

    def _write(self, batches: Iterator[pa.RecordBatch], batch_id: int | None) -> TaskCommit:
        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        if batch_id is None:
            prop = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
            batch_id = int(prop) if prop is not None else 0
        from oncelog.pipeline.txn_task import write_task

        with stage("write", partition=partition_id, batch=batch_id) as fields:
            result = write_task(self.sink, partition_id, batch_id, batches)
            fields["rows"] = result.rows
        return result

    def _commit(self, messages: Sequence[TaskCommit | None]) -> None:
        with stage("commit", tasks=len(messages)):
            end_transactions(self.sink.bootstrap, messages, commit=True)
            # Every task of this batch has reported, so any other open transaction of this query was left by a run
            # that died (it would hold back the output's LSO until transaction.timeout.ms): abort it.
            fence_dangling(self.sink, keep={m.transactional_id for m in messages if m is not None})

    def _abort(self, messages: Sequence[TaskCommit | None]) -> None:
        # Best effort: a transaction that cannot be aborted here is aborted by the next attempt of its
        # partition (init_transactions) or by the broker after transaction.timeout.ms.
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
