"""The executor half of the exactly-once write: one Spark task's rows in one transaction, left open ("prepared")
for the driver to commit.

Guarantees, for the task of (query, batch, Spark partition):

* the transactional.id is derived from (query, Spark partition), so ``init_transactions`` fences every earlier
  attempt of this partition and aborts the transaction such an attempt left open;
* the rows and a progress marker -- the offset ``batch + 1`` committed with TxnOffsetCommit into the group of
  (query, Spark partition) -- are in the same transaction, so the marker is visible iff the rows are committed;
  a task that finds no marker creates the marker topic first if it is missing;
* when the marker shows this batch (or a later one) committed, nothing is written and the message says so;
* on any error the transaction is aborted before the error propagates;
* on success the transaction is flushed but not committed: the returned :class:`TaskCommit` carries the producer
  id and epoch the driver needs to end it (see ``txn_end``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from oncelog.client import Admin, Consumer, KafkaError, OffsetAndMetadata, Producer, TopicPartition, TxnState
from oncelog.client.accumulator import RECORD_OVERHEAD
from oncelog.client.future import Future
from oncelog.client.types import RecordMetadata
from oncelog.pipeline.options import SinkOptions
from oncelog.pipeline.partitioning import partitions_for_keys
from oncelog.pipeline.rows import batch_to_sends
from oncelog.pipeline.txn_end import TaskCommit

WRITE_LINGER_MS = 20  # linger.ms for task producers (Kafka default 5): fuller batches at high rates
WRITE_BATCH_SIZE = 512 * 1024  # batch.size for task producers (Kafka default 16384)
SEND_CHUNK = 2000  # rows queued between two turns of the event loop


async def send_rows(
    producer: Producer, rows: Iterable[tuple[str, bytes | None, bytes | None, int | None, Any]]
) -> None:
    """Queue every (topic, key, value, partition, headers) row, as ``producer.send`` would, in bulk: each row is
    checked and queued in one step (``prepare_send`` then ``append_checked``, nothing awaited between them, as
    ``send`` itself does) without a coroutine per row, and one future stands for all rows (the transaction's state,
    checked after ``flush``, says whether every send succeeded). The event loop gets a turn every
    :data:`SEND_CHUNK` rows so the sender ships full batches meanwhile. A topic whose metadata is not cached goes
    through ``send`` (it fetches)."""
    prepare, append = producer.prepare_send, producer.append_checked
    shared: Future[RecordMetadata] = Future()  # no per-row result is read: a failed send fails the transaction
    for i, (topic, key, value, partition, headers) in enumerate(rows, 1):
        record, count, size = prepare(topic, value, key, partition, headers, None)
        if count is None:
            await producer.send(topic, value, key, partition=partition, headers=headers)
        else:
            append(topic, record, partition, count, size, shared)
        if i % SEND_CHUNK == 0:
            await anyio.lowlevel.checkpoint()


def _bulk_columns(batch: pa.RecordBatch, default_topic: str | None) -> tuple[pa.Array, pa.Array] | None:
    """(keys, values) as binary arrays when the batch can go through :func:`send_batch`'s bulk path: a ``topic``
    option, a value column, a key column without nulls (murmur2 decides every partition), no ``partition`` column
    with values and no headers; else None."""
    names = batch.schema.names
    if default_topic is None or "value" not in names or "key" not in names:
        return None
    keys = batch.column("key")
    if keys.null_count:
        return None
    if "partition" in names and batch.column("partition").null_count < batch.num_rows:
        return None
    if "headers" in names and pc.any(pc.greater(pc.list_value_length(batch.column("headers")), 0)).as_py():
        return None
    values = batch.column("value")
    keys, values = (
        col.cast(pa.binary()) if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else col
        for col in (keys, values)
    )
    if not pa.types.is_binary(keys.type) or not pa.types.is_binary(values.type):
        return None
    return keys, values


async def send_batch(producer: Producer, batch: pa.RecordBatch, default_topic: str | None) -> None:
    """Queue every row of ``batch`` as :func:`send_rows` of ``rows.batch_to_sends`` would, in bulk where
    :func:`_bulk_columns` allows: partitions by :func:`partitioning.partitions_for_keys` over the whole key column,
    rows grouped by partition in Arrow (their order kept within each partition), records built by one C-level pass
    and queued batch by batch (``Producer.append_many``, one future for all rows). Every other batch, and one with a
    row over max.request.size (which ``send`` refuses with its error), goes row by row."""
    columns = _bulk_columns(batch, default_topic)
    if columns is None or default_topic is None:
        await send_rows(producer, batch_to_sends(batch, default_topic))
        return
    keys, values = columns
    n = batch.num_rows
    if n == 0:
        return
    sizes = pc.add(
        pc.add(pc.fill_null(pc.binary_length(keys), 0), pc.fill_null(pc.binary_length(values), 0)), RECORD_OVERHEAD
    )
    if pc.max(sizes).as_py() > producer.max_record_size:
        await send_rows(producer, batch_to_sends(batch, default_topic))
        return
    count = await producer.partition_count(default_topic)
    parts = partitions_for_keys(keys, count)
    order = np.argsort(parts, kind="stable")
    bounds = np.searchsorted(parts[order], np.arange(count + 1)).tolist()
    keys, values, sizes = (col.take(order) for col in (keys, values, sizes))
    timestamp = int(time.time() * 1000)
    key_list, value_list = keys.to_pylist(), values.to_pylist()
    size_list = sizes.to_pylist()
    shared: Future[RecordMetadata] = Future()
    for partition in range(count):
        lo, hi = bounds[partition], bounds[partition + 1]
        if hi > lo:
            producer.append_many(
                default_topic, partition, count, key_list[lo:hi], value_list[lo:hi], size_list[lo:hi], timestamp, shared
            )
    await anyio.lowlevel.checkpoint()


def marker_tp(sink: SinkOptions) -> TopicPartition:
    return TopicPartition(sink.marker_topic, 0)


async def committed_batch(sink: SinkOptions, partition_id: int) -> int | None:
    """The last batch id the marker of (query, partition) shows committed, or None."""
    async with Consumer(
        sink.bootstrap, group_id=sink.marker_group(partition_id), client_id="oncelog-spark-writer"
    ) as consumer:
        committed = await consumer.committed(marker_tp(sink))
    return None if committed is None else committed - 1


async def ensure_marker_topic(sink: SinkOptions) -> None:
    """Create the marker topic (one partition) unless it exists: TxnOffsetCommit needs it. Concurrent creators
    are fine (TOPIC_ALREADY_EXISTS is success)."""
    async with Admin(sink.bootstrap, client_id="oncelog-spark-writer") as admin:
        try:
            await admin.create_topic(sink.marker_topic, 1)
        except KafkaError as exc:
            if exc.code is None or exc.code.name != "TOPIC_ALREADY_EXISTS":
                raise


async def _write(sink: SinkOptions, partition_id: int, batch_id: int, batches: Iterable[pa.RecordBatch]) -> TaskCommit:
    tid = sink.transactional_id(partition_id)
    config = {"linger_ms": WRITE_LINGER_MS, "batch_size": WRITE_BATCH_SIZE} | dict(sink.producer_config)
    async with Producer(
        sink.bootstrap,
        transactional_id=tid,
        transaction_timeout_ms=sink.transaction_timeout_ms,
        client_id="oncelog-spark-writer",
        **config,
    ) as producer:
        await producer.init_transactions()
        done = await committed_batch(sink, partition_id)
        if done is not None and done >= batch_id:
            return TaskCommit(tid, -1, -1, partition_id, batch_id, 0, skipped=True)
        if done is None:  # the first batch of this (query, partition), or the marker topic is missing
            await ensure_marker_topic(sink)
        await producer.begin_transaction()
        rows = 0
        try:
            it = iter(batches)
            # Spark produces the input while the event loop keeps sending: pull each batch in a worker thread.
            while (batch := await anyio.to_thread.run_sync(next, it, None)) is not None:
                await send_batch(producer, batch, sink.topic)
                rows += batch.num_rows
            if rows == 0:  # nothing to write: no transaction, no marker (an empty batch needs no replay guard)
                await producer.abort_transaction()
                return TaskCommit(tid, -1, -1, partition_id, batch_id, 0)
            marker = json.dumps(
                {"query": sink.query_id, "batch": batch_id, "partition": partition_id, "rows": rows}, sort_keys=True
            )
            await producer.send_offsets_to_transaction(
                {marker_tp(sink): OffsetAndMetadata(batch_id + 1, marker)}, sink.marker_group(partition_id)
            )
            await producer.flush()
            if producer.transaction_state is not TxnState.IN_TRANSACTION:  # a send failed: never commit
                raise KafkaError(f"transaction of {tid} failed ({producer.transaction_state})")
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(KafkaError):
                await producer.abort_transaction()
            raise
        pid, epoch = producer.producer_id_and_epoch
        return TaskCommit(tid, pid, epoch, partition_id, batch_id, rows)


def write_task(sink: SinkOptions, partition_id: int, batch_id: int, batches: Iterable[pa.RecordBatch]) -> TaskCommit:
    """Write ``batches`` for (query, ``batch_id``, ``partition_id``) in one transaction left open (blocking)."""
    return anyio.run(_write, sink, partition_id, batch_id, batches)
