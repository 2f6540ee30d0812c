"""Durability: group-committed fsync off the event loop, and the high watermark that follows it.

Each partition log is in one of two modes, chosen by its effective ``flush.messages`` / ``flush.ms`` (the topic's
override, else the broker's ``log.flush.interval.messages`` / ``log.flush.interval.ms``; see ``LogConfig``):

* **fsync before acknowledging** (flush.messages=1 and flush.ms unset; the broker default here): an append marks its
  log dirty; a request waiting for data no fsync under way covers starts an fdatasync of that log at once in the fsync
  helper process (``oncelog.broker.sync_process``), which runs a few in parallel; when it completes, the log's high
  watermark advances to what is now durable and the requests it covers are released. Each log has at most one fsync
  under way; appends that arrive meanwhile are covered by the next one, so concurrent producers share fsyncs (group
  commit), while different logs never wait for each other's fsyncs. Consumers only ever see durable data. Appends
  nobody waits for (acks=0, a transaction's Complete* record) start no fsync: the next waiter's fsync of that log
  covers them, or they are synced once their delay has passed (``UNWAITED_FLUSH_DELAY_S``, or the appender's own: a
  second for the Complete* record, which the same id's next state change usually covers sooner). A request that
  answers later (Produce) or waits for several logs asks for their fsyncs first (``request_sync``); they start when
  the event loop next switches tasks, in parallel.
* **page cache** (any other flush.messages, or a flush.ms): the high watermark advances at append and nobody waits;
  the flusher fsyncs a log once it holds flush.messages unflushed messages, or at the first look (every
  ``log.flush.scheduler.interval.ms``) at least flush.ms after its last fsync.

The mode follows config changes (``update_config``), with nothing acknowledged early and nothing left waiting:

* to page cache: the high watermark jumps to the log end; requests already waiting keep waiting for the fsync that
  covers them, which starts at once (they were promised durability when they were accepted).
* to fsync before acknowledging: the high watermark stays where it is (it never goes back); data still unflushed is
  synced within ``UNWAITED_FLUSH_DELAY_S``, and any later waiter's fsync covers it too (an fsync covers the whole log).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
import trio
from oncelog.broker.sync_process import SyncProcess
from oncelog.storage import faults
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError
from oncelog.storage.log import PartitionLog, SyncPlan

log = structlog.get_logger(__name__)

#: Helper threads that fdatasync different logs in parallel (a log has at most one fsync under way).
SYNC_THREADS = 8
#: How long data nobody waits for (an acks=0 produce) may stay unsynced in fsync mode before it gets a round of its
#: own, unless its appender names another delay; any waited round before then covers it too. Not a Kafka property.
UNWAITED_FLUSH_DELAY_S = 0.005


class SyncWaiter:
    """One request's wait for a log's data below ``offset`` to be fsynced (see ``LogFlusher.request_sync``)."""

    __slots__ = ("done", "error", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.done = trio.Event()
        self.error: BaseException | None = None


@dataclass
class _LogState:
    unflushed_messages: int = 0
    last_flush_ms: float = 0.0
    waiters: list[SyncWaiter] = field(default_factory=list)
    #: End offset of the fsync under way (None: none).
    in_flight_end: int | None = None
    #: Start another fsync as soon as the one under way completes.
    resync: bool = False


class LogFlusher:
    """Owns every fsync of partition data. Run ``run`` in the broker's nursery. Each log's mode is read from its
    config (``LogConfig.fsync_before_ack``); change a live log's config through ``update_config``."""

    def __init__(
        self,
        *,
        scheduler_interval_ms: int,
        on_high_watermark: Callable[[PartitionLog], None],
        high_watermark_for: Callable[[PartitionLog, int], int] | None = None,
    ) -> None:
        """``high_watermark_for(log, safe_end)`` gives the high watermark once the log's data below ``safe_end`` is
        safe on this node (default: ``safe_end``; a replicated partition's also waits for its followers)."""
        self._scheduler_interval_s = scheduler_interval_ms / 1000
        self._on_high_watermark = on_high_watermark
        self._high_watermark_for = high_watermark_for or (lambda _log, safe_end: safe_end)
        self._states: dict[PartitionLog, _LogState] = {}
        #: Logs to sync at the next due time, each with the time it is due by (page cache: over its flush.messages
        #: or flush.ms, due at once; fsync mode: appends nobody asked to sync yet, due ``unwaited_delay_s`` after the
        #: first).
        self._dirty: dict[PartitionLog, float] = {}
        #: Logs to sync as soon as the flusher runs (``request_sync``, a switch to page cache with waiters).
        self._requested: set[PartitionLog] = set()
        #: The earliest time a log in ``_dirty`` is due by (None: not armed).
        self._dirty_deadline: float | None = None
        self._next_check = math.inf  # next look for page-cache logs past their flush.ms (set by ``run``)
        self._sleep = trio.CancelScope()  # the flusher's current sleep; appends may bring its deadline forward
        self._syncer: SyncProcess[tuple[PartitionLog, int, SyncPlan | None]] = SyncProcess(
            SYNC_THREADS, self._completed
        )
        self._wakeup = trio.Event()
        self.fsyncs = 0

    def _state(self, partition_log: PartitionLog) -> _LogState:
        state = self._states.get(partition_log)
        if state is None:
            state = self._states[partition_log] = _LogState(last_flush_ms=trio.current_time() * 1000)
        return state

    def appended(
        self, partition_log: PartitionLog, records_count: int, *, unwaited_delay_s: float = UNWAITED_FLUSH_DELAY_S
    ) -> None:
        """Note an append; in page-cache mode the new data becomes visible at once.

        In fsync mode the append alone starts no fsync: the next waiter's fsync of the log covers it, and if nobody
        waits it is synced within ``unwaited_delay_s``."""
        state = self._state(partition_log)
        state.unflushed_messages += records_count
        config = partition_log.config
        if config.fsync_before_ack:
            self._mark_dirty(partition_log, trio.current_time() + unwaited_delay_s)
            return
        self._advance_high_watermark(partition_log, partition_log.log_end_offset)
        if state.unflushed_messages >= config.flush_messages:
            self._mark_dirty(partition_log, -math.inf)
            self._wakeup.set()

    def _advance_high_watermark(self, partition_log: PartitionLog, safe_end: int) -> None:
        """Raise the log's high watermark as far as data safe below ``safe_end`` allows; never lowers it."""
        high_watermark = self._high_watermark_for(partition_log, safe_end)
        if high_watermark > partition_log.high_watermark:
            partition_log.update_high_watermark(high_watermark)
            self._on_high_watermark(partition_log)

    def _mark_dirty(self, partition_log: PartitionLog, deadline: float) -> None:
        """Have the log synced by ``deadline`` (an earlier one it already has stands)."""
        if deadline < self._dirty.get(partition_log, math.inf):
            self._dirty[partition_log] = deadline
        if self._dirty_deadline is None or deadline < self._dirty_deadline:
            self._dirty_deadline = deadline
            self._sleep.deadline = min(self._sleep.deadline, deadline)

    def update_config(self, partition_log: PartitionLog, config: LogConfig) -> None:
        """Give a live log a new config (``PartitionLog.update_config``) and move it to the flush mode the config
        names (see the module docstring). A page-cache log already over its new flush.messages is synced at once."""
        was_fsync_before_ack = partition_log.config.fsync_before_ack
        partition_log.update_config(config)
        state = self._state(partition_log)
        if config.fsync_before_ack:
            if not was_fsync_before_ack and partition_log.durable_offset < partition_log.log_end_offset:
                self._mark_dirty(partition_log, trio.current_time() + UNWAITED_FLUSH_DELAY_S)
            return
        if was_fsync_before_ack:
            self._dirty.pop(partition_log, None)  # its unwaited deadline: page cache syncs by count and time
            self._advance_high_watermark(partition_log, partition_log.log_end_offset)
            if state.waiters:
                self._requested.add(partition_log)  # accepted in fsync mode: released by their fsync, as promised
                self._wakeup.set()
        if state.unflushed_messages >= config.flush_messages:
            self._mark_dirty(partition_log, -math.inf)
            self._wakeup.set()

    def forget(self, partition_log: PartitionLog) -> None:
        """Drop a deleted log; its waiters fail with a storage error."""
        self._dirty.pop(partition_log, None)
        self._requested.discard(partition_log)
        state = self._states.pop(partition_log, None)
        for waiter in state.waiters if state else ():
            waiter.error = KafkaStorageError("partition deleted before its data was flushed")
            waiter.done.set()

    def request_sync(self, partition_log: PartitionLog, end_offset: int) -> SyncWaiter | None:
        """Ask for every offset below ``end_offset`` to be fsynced, without waiting: ``wait_for`` the returned
        waiter later (None: nothing to wait for). The waiter is registered now, so any fsync failure from now on
        reaches it.

        The fsync starts when the calling task next yields, so the requests a connection reads back to back share
        one, or after the fsync under way. Produce calls this for the partitions it answers later: their fsyncs then
        overlap with those of the requests queued ahead of it, instead of starting when its answer reaches the
        front of the connection's queue."""
        if not partition_log.config.fsync_before_ack or partition_log.durable_offset >= end_offset:
            return None
        waiter = self._add_waiter(partition_log, end_offset)
        self._requested.add(partition_log)
        self._wakeup.set()
        return waiter

    @staticmethod
    async def wait_for(waiter: SyncWaiter | None) -> None:
        """Return once ``waiter``'s offsets are fsynced; raises KafkaStorageError if an fsync failed meanwhile.
        Not a checkpoint when they already are."""
        if waiter is None:
            return
        if not waiter.done.is_set():  # a finished one costs no pass of the scheduler (the connection's writer)
            await waiter.done.wait()
        if waiter.error is not None:
            raise KafkaStorageError(str(waiter.error)) from waiter.error

    async def wait_durable(self, partition_log: PartitionLog, end_offset: int) -> None:
        """Return once every offset below ``end_offset`` is fsynced; raises KafkaStorageError if the fsync failed."""
        if not partition_log.config.fsync_before_ack or partition_log.durable_offset >= end_offset:
            return
        waiter = self._add_waiter(partition_log, end_offset)
        self._request(partition_log, self._state(partition_log), end_offset)
        await self.wait_for(waiter)

    def _add_waiter(self, partition_log: PartitionLog, end_offset: int) -> SyncWaiter:
        waiter = SyncWaiter(end_offset)
        self._state(partition_log).waiters.append(waiter)
        return waiter

    def _request(self, partition_log: PartitionLog, state: _LogState, end_offset: int) -> None:
        if state.in_flight_end is None:
            self._start(partition_log, state)
        elif state.in_flight_end < end_offset:
            state.resync = True  # not covered by the fsync under way: the next one will be

    def _start(self, partition_log: PartitionLog, state: _LogState) -> None:
        """Start an fsync of the log up to its current end (none under way for it)."""
        if not self._syncer.running:  # not running yet: ``run`` starts it
            return
        end = partition_log.log_end_offset
        state.in_flight_end = end
        state.resync = False
        state.unflushed_messages = 0
        self._dirty.pop(partition_log, None)
        try:
            delay_ms = _fault_delay_ms()
            plan = partition_log.sync_plan(end, data_only=True)
        except (OSError, KafkaStorageError) as exc:
            self._syncer.fail((partition_log, end, None), exc)
            return
        self._syncer.submit((partition_log, end, plan), plan.fds if plan else (), full=False, delay_ms=delay_ms)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sync logs until cancelled. Owns the fsync helper for its lifetime; raises if the helper dies."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._syncer.run)
            for partition_log, state in list(self._states.items()):
                if state.waiters and state.in_flight_end is None:
                    self._start(partition_log, state)  # waited for before the flusher ran
            self._next_check = trio.current_time() + self._scheduler_interval_s
            task_status.started()
            while True:
                if self._wakeup.is_set():
                    await trio.lowlevel.checkpoint()
                else:
                    with trio.CancelScope(deadline=self._deadline()) as self._sleep:
                        await self._wakeup.wait()
                self._wakeup = trio.Event()
                self._start_due()

    def _deadline(self) -> float:
        return self._next_check if self._dirty_deadline is None else min(self._next_check, self._dirty_deadline)

    def _start_due(self) -> None:
        """Start fsyncs of the requested logs and of the dirty logs that are due (or mark them for one after the
        fsync under way)."""
        requested, self._requested = self._requested, set()
        for partition_log in requested:
            state = self._states.get(partition_log)
            if state is not None and partition_log.durable_offset < partition_log.log_end_offset:
                self._request(partition_log, state, partition_log.log_end_offset)
        now = trio.current_time()
        if now >= self._next_check:
            self._next_check = now + self._scheduler_interval_s
            self._add_overdue_logs(now * 1000)
        if self._dirty_deadline is None or now < self._dirty_deadline:
            return
        due = [partition_log for partition_log, deadline in self._dirty.items() if deadline <= now]
        for partition_log in due:
            del self._dirty[partition_log]
        self._dirty_deadline = min(self._dirty.values(), default=None)
        for partition_log in due:
            state = self._states.get(partition_log)
            if state is None:
                continue
            if state.in_flight_end is None:
                self._start(partition_log, state)
            else:
                state.resync = True

    def _add_overdue_logs(self, now_ms: float) -> None:
        """Mark the page-cache logs holding unflushed data for at least their flush.ms since their last fsync."""
        for partition_log, state in self._states.items():
            config = partition_log.config
            if (
                state.unflushed_messages
                and config.flushes_by_time
                and now_ms - state.last_flush_ms >= config.flush_ms
                and not config.fsync_before_ack
            ):
                self._mark_dirty(partition_log, -math.inf)

    def _completed(self, results: list[tuple[tuple[PartitionLog, int, SyncPlan | None], Exception | None]]) -> None:
        """Advance high watermarks and release the waiters the finished fsyncs cover."""
        now_ms = trio.current_time() * 1000
        for (partition_log, end_offset, plan), error in results:
            self.fsyncs += 1
            if error is None and plan is not None:
                partition_log.synced(plan)
            state = self._states.get(partition_log)
            if state is None:
                continue  # forgotten meanwhile
            state.in_flight_end = None
            state.last_flush_ms = now_ms
            if error is not None:
                log.error(
                    "flush_failed", topic=partition_log.topic, partition=partition_log.partition, error=str(error)
                )
            elif partition_log.config.fsync_before_ack and end_offset > partition_log.high_watermark:
                self._advance_high_watermark(partition_log, end_offset)
            if state.waiters:
                still_waiting = []
                for waiter in state.waiters:
                    if waiter.offset <= end_offset or error is not None:
                        waiter.error = error
                        waiter.done.set()
                    else:
                        still_waiting.append(waiter)
                state.waiters = still_waiting
                if still_waiting:
                    state.resync = True
            if state.resync:
                self._start(partition_log, state)


def _fault_delay_ms() -> int:
    """The ``storage.fsync`` fault point, on the event loop: a crash or I/O error happens here, a delay is left to
    the helper (which sleeps before syncing) so that it does not stall the loop."""
    if faults.action("storage.fsync") == "delay":
        return int(faults.DELAY_S * 1000)
    faults.fault_point("storage.fsync")
    return 0
