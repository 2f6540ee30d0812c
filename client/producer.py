"""The async producer: batching per partition, compression, idempotence and transactions (anyio: trio or asyncio).

Guarantees: ``send`` returns once the record is queued, with a future that resolves to its RecordMetadata or to the
error that stopped it; records of one partition are written in send order; with idempotence every batch carries
the producer id/epoch and a per-partition sequence that a retry keeps, so retries never duplicate records.
``commit_transaction`` flushes first; ``abort_transaction`` fails the records not yet sent and waits for those in
flight. Retriable errors are retried until delivery.timeout.ms; see ``errors.classify`` for the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import anyio
from oncelog.client.accumulator import BATCH_OVERHEAD, ProducerBatch, RecordAccumulator, record_size
from oncelog.client.cluster import Cluster
from oncelog.client.config import ProducerConfig
from oncelog.client.delay import CANCEL_TOPIC, DEFAULT_DELAY_LEVELS, parse_levels, schedule
from oncelog.client.errors import (
    ConfigError,
    ErrorClass,
    IllegalStateError,
    KafkaError,
    TransactionAbortedError,
    classify,
    error_for,
)
from oncelog.client.future import Future, Signal
from oncelog.client.partitioner import DefaultPartitioner
from oncelog.client.security import pop_security
from oncelog.client.txn_manager import TransactionManager, TxnState
from oncelog.client.types import GroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition
from oncelog.client.versions import pick
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch

# Errors after which the leader may have moved: refresh metadata before retrying.
_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

Bytes = bytes | str | None
_new_tuple = tuple.__new__  # a NamedTuple built without its Python-level __new__ (the per-record path)


def _to_bytes(value: Bytes) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return value
    raise TypeError(f"a record's key, value and header values must be bytes, str or None; got {type(value).__name__}")


def make_record(
    value: Bytes, key: Bytes, headers: Sequence[tuple[str, Bytes]] | None, timestamp_ms: int | None
) -> SimpleRecord:
    """The record ``send`` queues (timestamp: now unless given); TypeError for a key, value or header value that is
    not bytes, str or None."""
    ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    headers_b = [(k, v if type(v) is bytes else _to_bytes(v)) for k, v in headers] if headers else []
    if key is not None and type(key) is not bytes:
        key = _to_bytes(key)
    if value is not None and type(value) is not bytes:
        value = _to_bytes(value)
    return _new_tuple(SimpleRecord, (key, value, headers_b, ts))


def _check_partition(topic: str, partition: int | None, count: int) -> None:
    if partition is not None and not 0 <= partition < count:
        raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has no partition {partition}")


class Producer:
    """``async with Producer("host:port", transactional_id=...) as p: ...`` -- see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        partitioner: Callable[[str, bytes | None, int], int] | None = None,
        cluster: Cluster | None = None,
        **config: Any,
    ) -> None:
        """``config``: see :meth:`ProducerConfig.build`, and ``client.security`` for security_protocol, ssl_*, sasl_*;
        ``cluster`` replaces the connections (tests)."""
        security = pop_security(config)
        #: The broker's delay.levels: the levels ``send(delay_ms=...)`` chooses from.
        self.delay_levels = parse_levels(config.pop("delay_levels", DEFAULT_DELAY_LEVELS))
        self.config = ProducerConfig.build(**config)
        c = self.config
        self._cluster = cluster or Cluster(
            bootstrap_servers,
            client_id=c.client_id,
            request_timeout_ms=c.request_timeout_ms,
            max_in_flight=c.max_in_flight,
            retry_backoff_ms=c.retry_backoff_ms,
            security=security,
        )
        self._partitioner = partitioner or DefaultPartitioner()
        self._acc = RecordAccumulator(c.batch_size, c.linger_ms, c.delivery_timeout_ms, c.max_in_flight)
        self._txn: TransactionManager | None = None
        if c.enable_idempotence:
            self._txn = TransactionManager(
                self._cluster,
                c.transactional_id,
                transaction_timeout_ms=c.transaction_timeout_ms,
                retry_backoff_ms=c.retry_backoff_ms,
                max_block_ms=c.max_block_ms,
            )
        self._started = False
        self._closed = False
        self._flushing = 0
        self._wake: anyio.Event | None = None
        self._progress: Signal | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, get a producer id (idempotent, non-transactional) and start the sender task."""
        if self._started:
            return
        self._wake = anyio.Event()
        self._progress = Signal()
        await self._cluster.__aenter__()
        self._started = True
        try:
            await self._cluster.any_connection()
            if self._txn is not None and not self._txn.transactional:
                await self._txn.init_producer_id()
        except BaseException:
            await self._cluster.__aexit__(None, None, None)
            self._closed = True
            raise
        self._cluster.task_group.start_soon(self._sender)

    async def close(self, *, flush: bool = True) -> None:
        """Send what is queued (unless ``flush`` is False or the producer failed) and close the connections."""
        if self._closed or not self._started:
            self._closed = True
            return
        try:
            if flush and (self._txn is None or self._txn.state is not TxnState.FATAL_ERROR):
                with anyio.move_on_after(self.config.delivery_timeout_ms / 1000):
                    await self.flush()
        finally:
            self._closed = True
            self._acc.drop_unsent(IllegalStateError("producer closed"))
            await self._cluster.__aexit__(None, None, None)

    @property
    def transaction_state(self) -> TxnState | None:
        """The transaction manager's state (None without idempotence)."""
        return self._txn.state if self._txn is not None else None

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        return (self._txn.producer_id, self._txn.producer_epoch) if self._txn is not None else (-1, -1)

    def _check_open(self) -> None:
        if not self._started:
            raise IllegalStateError("the producer is not started (use it as an async context manager)")
        if self._closed:
            raise IllegalStateError("the producer is closed")

    # --- sending ------------------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Bytes,
        key: Bytes = None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, Bytes]] | None = None,
        timestamp_ms: int | None = None,
        delay_ms: int | None = None,
        deliver_at_ms: int | None = None,
        delay_id: str | None = None,
        ttl_ms: int | None = None,
    ) -> Future[RecordMetadata]:
        """Queue one record; returns a future of its RecordMetadata (``await`` it for delivery).

        ``delay_ms`` / ``deliver_at_ms`` (epoch ms) delay it: it goes to a delay-level topic and the DelayService
        delivers it to ``topic`` when due (``client.delay``); the future then tells where it entered the delay level.
        ``delay_id`` names it for cancellation (:meth:`cancel_delayed`); ``ttl_ms`` gives it a time-to-live."""
        topic, partition, headers, timestamp_ms = self.route_delayed(
            topic, partition, headers, timestamp_ms, delay_ms, deliver_at_ms, delay_id, ttl_ms
        )
        record, count, size = self.prepare_send(topic, value, key, partition, headers, timestamp_ms)
        if count is None:
            count = await self._cluster.partitions_for(topic)
            return self.append_record(topic, record, partition, count)
        # Nothing awaited since prepare_send checked the producer's state and the partition: queue at once.
        return self.append_checked(topic, record, partition, count, size)

    def route_delayed(
        self,
        topic: str,
        partition: int | None,
        headers: Sequence[tuple[str, Bytes]] | None,
        timestamp_ms: int | None,
        delay_ms: int | None,
        deliver_at_ms: int | None,
        delay_id: str | None,
        ttl_ms: int | None,
    ) -> tuple[str, int | None, Sequence[tuple[str, Bytes]] | None, int | None]:
        """Where ``send`` writes a record given its delay and TTL options (``client.delay.schedule``); unchanged
        without them."""
        if delay_ms is None and deliver_at_ms is None and delay_id is None and ttl_ms is None:
            return topic, partition, headers, timestamp_ms
        return schedule(
            self.delay_levels,
            topic,
            partition,
            headers,
            int(time.time() * 1000),
            delay_ms=delay_ms,
            deliver_at_ms=deliver_at_ms,
            delay_id=delay_id,
            ttl_ms=ttl_ms,
            timestamp_ms=timestamp_ms,
        )

    def prepare_send(
        self,
        topic: str,
        value: Bytes,
        key: Bytes,
        partition: int | None,
        headers: Sequence[tuple[str, Bytes]] | None,
        timestamp_ms: int | None,
    ) -> tuple[SimpleRecord, int | None, int]:
        """The part of ``send`` before queueing that needs no I/O: raise what ``send`` raises there (closed producer,
        transaction state, a key/value/header value not bytes, str or None, a record over max.request.size, a
        partition the topic lacks), build the record, and return it with the topic's partition count when the metadata
        cache knows it (else None) and its estimated size in a batch.

        Reads only, so the sync facade calls it on the caller's thread to raise there; it checks again on the event
        loop (:meth:`check_sendable`, then :meth:`append_checked`).
        """
        if self._closed or not self._started:
            self._check_open()
        txn = self._txn
        if txn is not None:
            txn.check_can_send()
        record = make_record(value, key, headers, timestamp_ms)
        size = record_size(record)
        if size + BATCH_OVERHEAD > self.config.max_request_size:
            raise error_for(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the record is {size + BATCH_OVERHEAD} bytes, more than max.request.size "
                f"({self.config.max_request_size})",
            )
        cluster = self._cluster
        info = cluster.topics.get(topic)
        if info is None or info.error_code or not cluster.metadata_fresh():
            return record, None, size
        count = len(info.leaders)
        if partition is not None:
            _check_partition(topic, partition, count)
        return record, count, size

    def check_sendable(self) -> None:
        """Raise unless records may be queued now (the producer is open, the transaction state allows sends)."""
        self._check_open()
        if self._txn is not None:
            self._txn.check_can_send()

    def append_record(
        self, topic: str, record: SimpleRecord, partition: int | None, count: int
    ) -> Future[RecordMetadata]:
        """Queue ``record`` for ``topic`` (of ``count`` partitions) without I/O: the second half of ``send``, on the
        event loop's thread."""
        self.check_sendable()
        return self.append_checked(topic, record, partition, count, record_size(record))

    def append_checked(
        self,
        topic: str,
        record: SimpleRecord,
        partition: int | None,
        count: int,
        size: int,
        fut: Future[RecordMetadata] | None = None,
    ) -> Future[RecordMetadata]:
        """:meth:`append_record` for a record of ``size`` estimated bytes, once :meth:`check_sendable` passed in the
        same step of the event loop (nothing awaited in between; the sync facade checks once per chunk of records).
        ``fut`` may be one future shared by many records of a caller that reads no per-record result (it is
        settled by the first of their batches to finish; a failed send also fails an open transaction)."""
        if partition is None:
            partition = self._partitioner(topic, record.key, count)
        else:
            _check_partition(topic, partition, count)
        tp = _new_tuple(TopicPartition, (topic, partition))
        txn = self._txn
        if txn is not None and txn.transactional_id is not None:
            txn.maybe_add_partition(tp)
        if fut is None:
            fut = Future()
        new, full = self._acc.append(tp, record, fut, time.monotonic(), size)
        if full and record.key is None and isinstance(self._partitioner, DefaultPartitioner):
            self._partitioner.next_batch(topic, count, partition)
        if new or full or self.config.linger_ms == 0 or (txn is not None and txn.new_partitions):
            self._wakeup()
        return fut

    async def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has, for :meth:`append_checked` (metadata refreshed when stale or unknown);
        raises what ``send`` raises for a topic it cannot find."""
        return await self._cluster.partitions_for(topic)

    def append_many(
        self,
        topic: str,
        partition: int,
        count: int,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        sizes: Sequence[int],
        timestamp_ms: int,
        fut: Future[RecordMetadata],
    ) -> None:
        """Queue one record per (key, value) pair, without headers and with ``timestamp_ms``, for ``partition`` of
        ``topic`` (of ``count`` partitions) in one step, as :meth:`append_checked` would queue each with the shared
        future ``fut``: the producer's state and the partition are checked once, the records are built by one C-level
        pass and batches are filled by slices. For bulk writers (the Spark sink) that computed each record's
        ``record_size`` (``sizes``) and checked it against :attr:`max_record_size`; keys and values must be bytes or
        None."""
        self.check_sendable()
        _check_partition(topic, partition, count)
        tp = _new_tuple(TopicPartition, (topic, partition))
        txn = self._txn
        if txn is not None and txn.transactional_id is not None:
            txn.maybe_add_partition(tp)
        records = list(map(_new_tuple, repeat(SimpleRecord), zip(keys, values, repeat(()), repeat(timestamp_ms))))
        new, full = self._acc.append_many(tp, records, sizes, fut, time.monotonic())
        if new or full or self.config.linger_ms == 0 or (txn is not None and txn.new_partitions):
            self._wakeup()

    @property
    def max_record_size(self) -> int:
        """The largest ``record_size`` a record may have (max.request.size less a batch header)."""
        return self.config.max_request_size - BATCH_OVERHEAD

    async def cancel_delayed(self, delay_id: str) -> Future[RecordMetadata]:
        """Cancel the pending delayed record(s) sent with ``delay_id``: a record to the compacted cancel topic (in the
        open transaction, if any). It takes effect for a record due at least a fetch wait (200 ms) after it is
        acknowledged; a record already delivered stays delivered."""
        return await self.send(CANCEL_TOPIC, b"cancel", delay_id)

    async def send_and_wait(self, topic: str, value: Bytes, key: Bytes = None, **kw: Any) -> RecordMetadata:
        """``send`` and wait for delivery."""
        fut = await self.send(topic, value, key, **kw)
        return await fut

    async def flush(self) -> None:
        """Wait until every queued record is delivered or failed (sends lingering batches at once)."""
        self._check_open()
        assert self._progress is not None
        self._flushing += 1
        try:
            self._wakeup()
            while self._acc.has_in_flight() or (self._acc.queued() and not self._stuck()):
                await self._progress.wait()
        finally:
            self._flushing -= 1

    def _stuck(self) -> bool:
        """Queued batches can never go out: the transaction failed (abort drops them)."""
        return self._txn is not None and self._txn.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    def _wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- transactions -------------------------------------------------------------------------------------

    def _txn_required(self, method: str) -> TransactionManager:
        if self._txn is None or not self._txn.transactional:
            raise ConfigError(f"{method} requires transactional.id to be set")
        self._check_open()
        return self._txn

    async def init_transactions(self) -> None:
        """Get the producer id/epoch for transactional.id, fencing older producers and ending their transaction."""
        await self._txn_required("init_transactions").init_producer_id()

    async def begin_transaction(self) -> None:
        self._txn_required("begin_transaction").begin()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], group_metadata: GroupMetadata | str
    ) -> None:
        """Commit consumer offsets as part of the transaction (AddOffsetsToTxn + TxnOffsetCommit)."""
        await self._txn_required("send_offsets_to_transaction").send_offsets(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Flush, then commit; raises AbortableTransactionError if any record of the transaction failed."""
        txn = self._txn_required("commit_transaction")
        txn.check_not_failed()
        if txn.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            raise IllegalStateError(f"commit_transaction called in state {txn.state.name}")
        await self.flush()
        txn.check_not_failed()
        txn.transition(TxnState.COMMITTING_TRANSACTION)
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """Drop unsent records (their futures fail with TransactionAbortedError), wait for in-flight ones, abort."""
        txn = self._txn_required("abort_transaction")
        if txn.state is TxnState.FATAL_ERROR:
            txn.check_not_failed()
        txn.transition(TxnState.ABORTING_TRANSACTION)
        self._acc.drop_unsent(TransactionAbortedError("the transaction was aborted"))
        assert self._progress is not None
        while self._acc.has_in_flight():
            await self._progress.wait()
        await txn.end(commit=False)

    # --- the sender task ----------------------------------------------------------------------------------

    def _sendable(self, tp: TopicPartition) -> bool:
        return self._txn is None or self._txn.is_sendable(tp)

    async def _sender(self) -> None:
        assert self._progress is not None
        while True:
            txn = self._txn
            if txn is not None and txn.new_partitions:
                await txn.add_partitions()
                self._progress.notify()
            if txn is not None and txn.state is TxnState.FATAL_ERROR and self._acc.queued():
                self._acc.drop_unsent(txn.last_error or KafkaError("fatal producer error"))
                self._progress.notify()
            now = time.monotonic()
            for batch in self._acc.expired(now):
                batch.fail(KafkaError(f"delivery.timeout.ms expired for {batch.tp}", ErrorCode.REQUEST_TIMED_OUT))
                self._progress.notify()
            batches, wait_s = self._acc.ready(now, flushing=self._flushing > 0, sendable=self._sendable)
            if batches:
                await self._dispatch(batches)
            if txn is not None and txn.new_partitions and txn.state is TxnState.IN_TRANSACTION:
                wait_s = 0.0
            assert self._wake is not None
            if not self._wake.is_set():
                with anyio.move_on_after(wait_s):
                    await self._wake.wait()
            self._wake = anyio.Event()

    async def _dispatch(self, batches: list[ProducerBatch]) -> None:
        """Write one Produce request per leader, in order (the sender is the only writer), then let a task
        wait for each response."""
        by_node: dict[int, list[ProducerBatch]] = {}
        for batch in batches:
            try:
                leader = await self._cluster.leader_for(batch.tp)
            except KafkaError as exc:
                self._handle_error(batch, exc.code or ErrorCode.UNKNOWN_SERVER_ERROR, exc)
                self._finished([batch])
                continue
            if batch.payload is None:
                self._encode(batch)
            by_node.setdefault(leader, []).append(batch)
        for node, node_batches in by_node.items():
            # Kafka takes one batch per partition per request: the n-th batch of each partition goes in request n.
            rounds: list[list[ProducerBatch]] = []
            depth: dict[TopicPartition, int] = {}
            for batch in node_batches:
                n = depth.get(batch.tp, 0)
                depth[batch.tp] = n + 1
                if n == len(rounds):
                    rounds.append([])
                rounds[n].append(batch)
            for request_batches in rounds:
                await self._submit(node, request_batches)

    def _encode(self, batch: ProducerBatch) -> None:
        txn = self._txn
        kw: dict[str, Any] = {"compression": self.config.compression}
        if txn is not None:
            kw.update(
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                base_sequence=txn.next_sequence(batch.tp, len(batch.records)),
                transactional=txn.transactional,
            )
            batch.base_sequence = kw["base_sequence"]
        batch.payload = encode_batch(batch.records, **kw)

    async def _submit(self, node: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for batch in batches:
            batch.attempts += 1
            topics.setdefault(batch.tp.topic, []).append({"index": batch.tp.partition, "records": batch.payload})
        body = {
            "transactional_id": self.config.transactional_id,
            "acks": self.config.acks,
            "timeout_ms": self.config.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }
        acks = self.config.acks != 0
        try:
            conn = await self._cluster.connection(node)
            version = pick(conn.versions, ApiKey.PRODUCE)
            pending = await conn.submit(ApiKey.PRODUCE, version, body, expect_response=acks)
        except KafkaError as exc:
            for batch in batches:
                self._handle_error(batch, exc.code or ErrorCode.NETWORK_EXCEPTION, exc)
            self._finished(batches)
            return
        if pending is None:  # acks=0
            for batch in batches:
                batch.complete(-1, -1)
            self._finished(batches)
            return
        self._cluster.task_group.start_soon(self._await_response, conn, version, pending, batches)

    async def _await_response(self, conn: Any, version: int, pending: Any, batches: list[ProducerBatch]) -> None:
        try:
            resp = conn.decode(ApiKey.PRODUCE, version, await conn.wait(pending))
        except KafkaError as exc:
            for batch in batches:
                self._handle_error(batch, exc.code or ErrorCode.NETWORK_EXCEPTION, exc)
        else:
            self.handle_produce_response(batches, resp)
        finally:
            self._finished(batches)

    def _finished(self, batches: list[ProducerBatch]) -> None:
        for batch in batches:
            self._acc.done(batch)
        assert self._progress is not None
        self._progress.notify()
        self._wakeup()

    def handle_produce_response(self, batches: list[ProducerBatch], resp: Any) -> None:
        """Complete, retry or fail each batch per its partition's error code."""
        by_tp = {batch.tp: batch for batch in batches}
        for topic in resp.responses:
            for p in topic.partition_responses:
                batch = by_tp.pop(TopicPartition(topic.name, p.index), None)
                if batch is None:
                    continue
                if p.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    batch.complete(p.base_offset, p.log_append_time_ms)
                else:
                    self._handle_error(batch, p.error_code, None, p.error_message)
        for batch in by_tp.values():
            self._handle_error(batch, ErrorCode.UNKNOWN_SERVER_ERROR, KafkaError("no response for the partition"))

    def _handle_error(
        self, batch: ProducerBatch, code: int, exc: KafkaError | None, message: str | None = None
    ) -> None:
        now = time.monotonic()
        retriable = classify(code) is ErrorClass.RETRIABLE or (
            # A batch behind one being retried: the broker saw a gap in the sequence. Resend it after that one.
            code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._acc.earlier_pending(batch)
        )
        if (
            retriable
            and batch.attempts <= self.config.retries
            and now < batch.deadline
            and not self._closed
            and not self._stuck()
        ):
            batch.retry_at = now + self.config.retry_backoff_ms / 1000
            self._acc.requeue(batch)
            if code in _METADATA_ERRORS:
                self._cluster.invalidate()
            return
        error = exc if exc is not None else error_for(code, message)
        if self._txn is not None:
            raised = self._txn.fail(error)
            error = raised if self._txn.state is TxnState.FATAL_ERROR else error
        batch.fail(error)
