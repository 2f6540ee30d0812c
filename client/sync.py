"""Blocking Producer, Consumer and Admin for scripts and Spark tasks.

Each object runs its async counterpart on an event loop in a background thread (anyio's blocking portal); a method
call blocks the caller for one call into that thread. The two per-record paths do not cross threads per record:

- ``Producer.send`` runs on the caller's thread the part of the async ``send`` that needs no I/O
  (``prepare_send``: it raises there what ``send`` raises: closed producer, transaction state, a key or value not
  bytes, str or None, a record over max.request.size, a partition the topic lacks; and builds the record), appends
  the record to a hand-off queue and returns a :class:`DeliveryHandle`. One drain task on the loop moves the queue
  into the async producer's accumulator (``append_record``) in chunks, in queue order, so the records of one
  partition keep the order in which ``send`` returned. The caller wakes that task (without waiting for it) only when
  it sleeps. A topic whose metadata is not cached takes the old path once: one blocking call to the async ``send``
  (which fetches it, or raises). Every other producer call (``flush``, the transaction methods,
  ``DeliveryHandle.get`` before delivery) first drains the queue on the loop, so it sees every record handed over
  before it: ``commit_transaction`` commits them, ``abort_transaction`` drops them. What fails a record once it
  reaches the loop (the transaction failed in between; a custom partitioner, which runs there) fails its handle.
  At most :data:`HANDOFF_MAX_RECORDS` records wait in the queue; ``send`` then blocks until the drain task catches
  up, at most max.block.ms (then KafkaTimeoutError).
- Iterating a ``Consumer`` takes records from the async consumer's fetch buffer on the caller's thread, one at a time
  (so positions and commits stay exact per record), and calls ``getmany`` on the loop (group membership, auto-commit,
  fetching) only when that buffer is empty or max.poll.records records were taken since the last call. Like Kafka's
  consumer, a facade consumer is used from one thread at a time.

Guarantees otherwise: the semantics and errors of the async clients; every method not defined here is forwarded to
the async client and waited for. Use as context managers or call close(). ``backend``: "asyncio" or "trio".
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
from anyio.from_thread import BlockingPortal, start_blocking_portal
from oncelog.client.admin import Admin as AsyncAdmin
from oncelog.client.consumer import Consumer as AsyncConsumer
from oncelog.client.errors import IllegalStateError, KafkaTimeoutError
from oncelog.client.fetch_parse import Selected
from oncelog.client.future import Future
from oncelog.client.producer import Producer as AsyncProducer
from oncelog.client.types import ConsumerRecord, RecordMetadata, TopicPartition
from oncelog.protocol.records import SimpleRecord

# Records ``send`` may hand over before it waits for the event loop. A small queue measured faster than a large one
# (2,000 vs 20,000: about 120k vs 90k records/s in bench/client_bench.py's setup): the caller blocks sooner, so the
# threads trade the GIL less often, and the records are still in the CPU's cache when the loop takes them. Not a
# Kafka setting (Kafka bounds the accumulator by buffer.memory; the async accumulator is not bounded).
HANDOFF_MAX_RECORDS = 2000
# Records the drain task moves into the accumulator between two checkpoints (lets the sender task interleave).
DRAIN_CHUNK = 500


class _Blocking:
    def __init__(self, factory: Callable[[], Any], backend: str) -> None:
        self._portal_cm = start_blocking_portal(backend)
        self._portal: BlockingPortal = self._portal_cm.__enter__()
        self._cm: Any = None
        try:
            self._async = self._portal.call(factory)
            self._cm = self._portal.wrap_async_context_manager(self._running())
            self._cm.__enter__()
        except BaseException:
            self._cm = None
            self._portal_cm.__exit__(None, None, None)
            raise

    def _running(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """What runs on the loop while the facade is open: the async client."""
        return self._async

    def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return self._portal.call(functools.partial(fn, *args, **kw))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._async, name)
        if callable(attr):
            return functools.partial(self._call, attr)
        return attr

    def close(self) -> None:
        """Close the async client and stop the event loop thread (idempotent)."""
        cm, self._cm = self._cm, None
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            finally:
                self._portal_cm.__exit__(None, None, None)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class DeliveryHandle:
    """One record's delivery, seen from a blocking thread: :meth:`get` waits for it, :meth:`done` does not."""

    __slots__ = ("_error", "_fut", "_producer")

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._fut: Future[RecordMetadata] | None = None  # set on the loop when the record reaches the accumulator
        self._error: BaseException | None = None  # set instead when the async producer refused it there

    def done(self) -> bool:
        """True once the record is delivered or failed."""
        fut = self._fut
        return fut.done() if fut is not None else self._error is not None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for delivery; raises the delivery error, or TimeoutError after ``timeout`` seconds."""
        if not self.done():
            self._producer._call(self._wait, timeout)
        if self._error is not None:
            raise self._error
        assert self._fut is not None
        return self._fut.result()

    async def _wait(self, timeout: float | None) -> None:
        with anyio.fail_after(timeout):
            if self._fut is not None:  # the hand-off queue was drained before this ran
                with contextlib.suppress(Exception):
                    await self._fut.wait()


class _Handoff:
    """Records handed from caller threads to the event loop in bulk (see the module docstring).

    ``put`` runs on any thread; ``drain`` and ``run`` on the loop. Each chunk is taken and applied without an
    ``await`` in between, so any number of drains keep the queue's order.
    """

    def __init__(self, apply: Callable[[list[Any]], None], max_block_ms: int) -> None:
        self._apply = apply  # applies a chunk of items, in order
        self._max_block_s = max_block_ms / 1000
        self._token = anyio.lowlevel.current_token()
        self._lock = threading.Lock()  # a plain lock on the fast path; the condition only to wait for room
        self._room = threading.Condition(self._lock)
        self._items: list[Any] = []
        self._idle = True  # the drain task waits for a wake-up: the next put must send one
        self._blocked = 0  # callers waiting for room
        self._closed = False
        self._wake = anyio.Event()

    def put(self, item: Any) -> None:
        with self._lock:
            if len(self._items) >= HANDOFF_MAX_RECORDS:
                self._wait_for_room()
            if self._closed:
                raise IllegalStateError("the producer is closed")
            self._items.append(item)
            wake, self._idle = self._idle, False
        if wake:  # without waiting for the loop: anyio's portal calls would block
            self._token.backend_class.run_sync_soon(self._on_wake, (), self._token.native_token)

    def _wait_for_room(self) -> None:
        deadline = time.monotonic() + self._max_block_s
        self._blocked += 1
        try:
            while len(self._items) >= HANDOFF_MAX_RECORDS and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError("the event loop took no record for max.block.ms")
                self._room.wait(remaining)
        finally:
            self._blocked -= 1

    def _take(self) -> list[Any]:
        with self._lock:
            items = self._items
            if len(items) <= DRAIN_CHUNK:
                self._items, chunk = [], items
            else:
                chunk = items[:DRAIN_CHUNK]
                del items[:DRAIN_CHUNK]
            if not chunk:
                self._idle = True
            if self._blocked and len(self._items) <= HANDOFF_MAX_RECORDS // 2:
                self._room.notify_all()  # wake waiting callers once half the room is free: fewer GIL hand-overs
        return chunk

    def _on_wake(self) -> None:
        self._wake.set()

    async def drain(self) -> None:
        """Apply every record handed over so far, in order."""
        while chunk := self._take():
            self._apply(chunk)
            await anyio.lowlevel.checkpoint()

    async def run(self) -> None:
        """The drain task: drain whenever woken."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.drain()

    async def close(self) -> None:
        """Drain what is queued; later puts raise IllegalStateError."""
        with self._lock:
            self._closed = True
            self._room.notify_all()
        await self.drain()


class Producer(_Blocking):
    """Blocking producer; takes the same arguments as :class:`oncelog.client.Producer` plus ``backend``.

    ``send`` returns at once with a :class:`DeliveryHandle` (see the module docstring); ``flush`` waits for every
    record sent before it.
    """

    _async: AsyncProducer

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        self._handoff: _Handoff | None = None
        super().__init__(lambda: AsyncProducer(bootstrap_servers, **config), backend)

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[AsyncProducer]:
        async with self._async, anyio.create_task_group() as tg:
            self._handoff = handoff = _Handoff(self._apply, self._async.config.max_block_ms)
            tg.start_soon(handoff.run)
            try:
                yield self._async
            finally:
                await handoff.close()  # before the producer's close, which flushes what it holds
                tg.cancel_scope.cancel()

    def _apply(self, chunk: list[tuple[DeliveryHandle, str, SimpleRecord, int | None, int, int]]) -> None:
        producer = self._async
        try:
            producer.check_sendable()  # once per chunk: nothing in the loop below awaits
        except Exception as exc:
            for handle, *_ in chunk:
                handle._error = exc
            return
        append = producer.append_checked
        for handle, topic, record, partition, count, size in chunk:
            try:
                handle._fut = append(topic, record, partition, count, size)
            except Exception as exc:
                handle._error = exc

    def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Call ``fn`` on the loop once every record handed over before has reached the async producer."""
        return self._portal.call(self._after_handoff, functools.partial(fn, *args, **kw))

    async def _after_handoff(self, fn: Callable[[], Any]) -> Any:
        if self._handoff is not None:
            await self._handoff.drain()
        result = fn()
        return await result if inspect.isawaitable(result) else result

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        *,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
        delay_ms: int | None = None,
        deliver_at_ms: int | None = None,
        delay_id: str | None = None,
        ttl_ms: int | None = None,
    ) -> DeliveryHandle:
        """Hand one record over; raises at once what the async ``send`` raises before queueing. The delay and TTL
        options are the async ``send``'s."""
        producer, handoff = self._async, self._handoff
        if handoff is None:
            raise IllegalStateError("the producer is closed")
        topic, partition, headers, timestamp_ms = producer.route_delayed(
            topic, partition, headers, timestamp_ms, delay_ms, deliver_at_ms, delay_id, ttl_ms
        )
        record, count, size = producer.prepare_send(topic, value, key, partition, headers, timestamp_ms)
        handle = DeliveryHandle(self)
        if count is None:  # metadata to fetch: the async send does it (and raises for an unknown topic)
            kw = {"partition": partition, "headers": headers, "timestamp_ms": record.timestamp}
            handle._fut = self._call(producer.send, topic, value, key, **kw)
        else:
            handoff.put((handle, topic, record, partition, count, size))
        return handle

    def send_and_wait(self, topic: str, value: Any, key: Any = None, **kw: Any) -> RecordMetadata:
        return self.send(topic, value, key, **kw).get()

    def flush(self) -> None:
        """Wait until every record sent before is delivered or failed."""
        self._call(self._async.flush)

    def init_transactions(self) -> None:
        self._call(self._async.init_transactions)

    def begin_transaction(self) -> None:
        self._call(self._async.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any) -> None:
        self._call(self._async.send_offsets_to_transaction, offsets, group_metadata)

    def commit_transaction(self) -> None:
        """Commit every record sent before (they are flushed first)."""
        self._call(self._async.commit_transaction)

    def abort_transaction(self) -> None:
        """Abort; records sent before and not yet delivered fail with TransactionAbortedError."""
        self._call(self._async.abort_transaction)

    def close(self) -> None:
        """Deliver what was sent (as the async close does), close, stop the event loop thread (idempotent)."""
        super().close()
        self._handoff = None


class Consumer(_Blocking):
    """Blocking consumer; iterate it for records one by one (fetched in bulk), or call :meth:`getmany`."""

    _async: AsyncConsumer

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        super().__init__(lambda: AsyncConsumer(bootstrap_servers, **config), backend)

    def assign(self, partitions: Any) -> None:
        self._call(self._async.assign, list(partitions))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._async.seek, tp, offset)

    def position(self, tp: TopicPartition) -> int:
        return self._call(self._async.position, tp)

    def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._call(self._async.getmany, *partitions, timeout_ms=timeout_ms, max_records=max_records)

    def getmany_batches(self, tp: TopicPartition, *, timeout_ms: int = 0) -> list[Selected]:
        return self._call(self._async.getmany_batches, tp, timeout_ms=timeout_ms)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        consumer = self._async
        while True:
            polled = self._call(consumer.getmany, timeout_ms=consumer.fetch_max_wait_ms, max_records=1)
            for records in polled.values():
                yield from records
            take = consumer.take_buffered
            for _ in range(consumer.max_poll_records - 1 if polled else 0):
                record = take()
                if record is None:
                    break
                yield record


class Admin(_Blocking):
    """Blocking admin client; every method of :class:`oncelog.client.Admin`, blocking."""

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        super().__init__(lambda: AsyncAdmin(bootstrap_servers, **config), backend)
