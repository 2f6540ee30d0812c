"""Durability: group-committed fsync off the event loop, and the high watermark that follows it.

Two modes, chosen by Kafka's flush properties (see broker.config):

* **fsync before acknowledging** (``log.flush.interval.messages=1``, the default here): an append marks its log dirty;
  one flusher task fdatasyncs every dirty log's data off the event loop (several logs in parallel), then advances
  each log's high watermark to what is now durable and wakes the requests waiting for it. Appends that arrive during
  an fsync are covered by the next one, so concurrent producers share fsyncs (group commit). Consumers only ever see
  durable data.
* **page cache** (larger ``log.flush.interval.messages`` or a ``log.flush.interval.ms``): the high watermark advances
  at append; the flusher fsyncs a log once it holds that many unflushed messages or that much time has passed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import structlog
import trio
from oncelog.storage.errors import KafkaStorageError
from oncelog.storage.log import PartitionLog

log = structlog.get_logger(__name__)

#: Threads that fdatasync different logs of one round in parallel.
SYNC_THREADS = 8


@dataclass
class _Waiter:
    offset: int
    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None


@dataclass
class _LogState:
    unflushed_messages: int = 0
    last_flush_ms: float = 0.0
    waiters: list[_Waiter] = field(default_factory=list)


class LogFlusher:
    """Owns every fsync of partition data. Run ``run`` in the broker's nursery."""

    def __init__(
        self,
        *,
        fsync_before_ack: bool,
        interval_messages: int,
        interval_ms: int,
        scheduler_interval_ms: int,
        on_high_watermark: Callable[[PartitionLog], None],
    ) -> None:
        self.fsync_before_ack = fsync_before_ack
        self._interval_messages = interval_messages
        self._interval_ms = interval_ms
        self._scheduler_interval_s = scheduler_interval_ms / 1000
        self._on_high_watermark = on_high_watermark
        self._states: dict[PartitionLog, _LogState] = {}
        self._dirty: set[PartitionLog] = set()
        self._in_flight: dict[PartitionLog, int] = {}  # log -> end offset of the fsync under way
        self._pool: ThreadPoolExecutor | None = None
        self._wakeup = trio.Event()
        self.fsyncs = 0

    def _state(self, partition_log: PartitionLog) -> _LogState:
        state = self._states.get(partition_log)
        if state is None:
            state = self._states[partition_log] = _LogState(last_flush_ms=trio.current_time() * 1000)
        return state

    def appended(self, partition_log: PartitionLog, records_count: int) -> None:
        """Note an append; in page-cache mode the new data becomes visible at once."""
        state = self._state(partition_log)
        state.unflushed_messages += records_count
        if self.fsync_before_ack:
            self._mark_dirty(partition_log)
            return
        partition_log.update_high_watermark(partition_log.log_end_offset)
        self._on_high_watermark(partition_log)
        if state.unflushed_messages >= self._interval_messages:
            self._mark_dirty(partition_log)

    def forget(self, partition_log: PartitionLog) -> None:
        """Drop a deleted log; its waiters fail with a storage error."""
        self._dirty.discard(partition_log)
        state = self._states.pop(partition_log, None)
        for waiter in state.waiters if state else ():
            waiter.error = KafkaStorageError("partition deleted before its data was flushed")
            waiter.done.set()

    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None:
        """Return once every offset below ``end_offset`` is fsynced; raises KafkaStorageError if the fsync failed."""
        if not self.fsync_before_ack or partition_log.durable_offset >= end_offset:
            return
        waiter = _Waiter(end_offset)
        self._state(partition_log).waiters.append(waiter)
        if self._in_flight.get(partition_log, -1) < end_offset:
            # Not covered by the fsync under way (if any): make sure a round will cover it.
            self._mark_dirty(partition_log)
        await waiter.done.wait()
        if waiter.error is not None:
            raise KafkaStorageError(str(waiter.error)) from waiter.error

    def _mark_dirty(self, partition_log: PartitionLog) -> None:
        self._dirty.add(partition_log)
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush dirty logs until cancelled. Owns the pool of sync threads for its lifetime."""
        with ThreadPoolExecutor(max_workers=SYNC_THREADS, thread_name_prefix="oncelog-sync") as pool:
            self._pool = pool
            task_status.started()
            try:
                while True:
                    timeout = math.inf if self.fsync_before_ack else self._scheduler_interval_s
                    with trio.move_on_after(timeout):
                        await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    self._add_overdue_logs()
                    if self._dirty:
                        await self.flush_dirty()
            finally:
                self._pool = None

    def _add_overdue_logs(self) -> None:
        if self._interval_ms < 0:
            return
        now_ms = trio.current_time() * 1000
        for partition_log, state in self._states.items():
            if state.unflushed_messages and now_ms - state.last_flush_ms >= self._interval_ms:
                self._dirty.add(partition_log)

    async def flush_dirty(self) -> None:
        """fdatasync every dirty log, then release the waiters it covers."""
        batch = [(partition_log, partition_log.log_end_offset) for partition_log in self._dirty]
        self._dirty = set()
        for partition_log, _ in batch:
            self._state(partition_log).unflushed_messages = 0
        self._in_flight = dict(batch)
        try:
            # One hop to a worker thread per round; it spreads the logs over the sync pool so their fdatasyncs
            # overlap (the device serves them in parallel) without a thread hand-off per log.
            outcomes = await trio.to_thread.run_sync(_flush_all, batch, self._pool)
        finally:
            self._in_flight = {}
        self.fsyncs += 1
        now_ms = trio.current_time() * 1000
        for (partition_log, end_offset), error in zip(batch, outcomes, strict=True):
            state = self._states.get(partition_log)
            if state is None:
                continue
            state.last_flush_ms = now_ms
            if error is not None:
                log.error(
                    "flush_failed", topic=partition_log.topic, partition=partition_log.partition, error=str(error)
                )
            elif self.fsync_before_ack and end_offset > partition_log.high_watermark:
                partition_log.update_high_watermark(end_offset)
                self._on_high_watermark(partition_log)
            still_waiting = []
            for waiter in state.waiters:
                if waiter.offset <= end_offset or error is not None:
                    waiter.error = error
                    waiter.done.set()
                else:
                    still_waiting.append(waiter)
            state.waiters = still_waiting
            if still_waiting:
                self._mark_dirty(partition_log)


def _flush_data(partition_log: PartitionLog, end_offset: int) -> BaseException | None:
    """Make the log's data durable up to ``end_offset``; a failure is returned, not raised."""
    try:
        partition_log.flush_data(end_offset)
    except (OSError, KafkaStorageError) as exc:
        return exc
    return None


def _flush_all(
    batch: list[tuple[PartitionLog, int]], pool: ThreadPoolExecutor | None
) -> list[BaseException | None]:
    """Runs in a worker thread: sync every log of the round, in parallel on ``pool`` when there are several."""
    if len(batch) == 1 or pool is None:
        return [_flush_data(partition_log, end) for partition_log, end in batch]
    return list(pool.map(_flush_data, *zip(*batch, strict=True)))
