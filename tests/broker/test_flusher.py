"""LogFlusher in fsync-before-ack mode: per-log fsyncs in the fsync helper process, unwaited appends deferred."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest
import trio
import trio.testing
from oncelog.broker.flusher import UNWAITED_FLUSH_DELAY_S, LogFlusher
from oncelog.broker.sync_process import SyncHelperDied
from oncelog.protocol.records import SimpleRecord, encode_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError
from oncelog.storage.log import PartitionLog, SyncPlan


def _flusher(advanced: list[PartitionLog] | None = None) -> LogFlusher:
    return LogFlusher(
        scheduler_interval_ms=1000,
        on_high_watermark=(advanced if advanced is not None else []).append,
    )


def _append(flusher: LogFlusher, partition_log: PartitionLog, count: int = 1, **appended: float) -> int:
    """Append ``count`` records; the end offset to wait for."""
    batch = encode_batch([SimpleRecord(b"k", b"v%d" % i) for i in range(count)], now_ms=0)
    result = partition_log.append(batch, now_ms=0)
    flusher.appended(partition_log, count, **appended)
    return result.last_offset + 1


async def _until(condition, seconds: float = 5.0) -> None:
    """Poll in real time (independent of the trio clock) until ``condition()`` holds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await trio.to_thread.run_sync(time.sleep, 0.002)


@pytest.fixture
def logs(tmp_path: Path):
    opened = [PartitionLog.open(tmp_path / f"t-{i}", LogConfig()) for i in range(2)]
    yield opened
    for partition_log in opened:
        partition_log.close()


async def test_waiter_released_once_durable_and_high_watermark_follows(logs) -> None:
    advanced: list[PartitionLog] = []
    flusher = _flusher(advanced)
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        end = _append(flusher, logs[0], 3)
        assert logs[0].high_watermark == 0  # nothing visible before the fsync
        await flusher.wait_durable(logs[0], end)
        assert logs[0].durable_offset >= end
        assert logs[0].high_watermark == end
        assert advanced == [logs[0]]
        nursery.cancel_scope.cancel()


async def test_unwaited_append_starts_no_fsync_until_its_delay(logs, mock_clock) -> None:
    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        end = _append(flusher, logs[0])
        await trio.testing.wait_all_tasks_blocked()
        assert flusher.fsyncs == 0 and logs[0].durable_offset == 0
        mock_clock.jump(UNWAITED_FLUSH_DELAY_S)
        await _until(lambda: logs[0].high_watermark == end)
        assert logs[0].durable_offset == end
        nursery.cancel_scope.cancel()


async def test_each_unwaited_append_is_synced_by_its_own_delay(logs, mock_clock) -> None:
    """An append with a longer delay (a Complete* record) is not synced when another log's shorter one falls due."""
    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        lazy_end = _append(flusher, logs[1], unwaited_delay_s=1.0)
        end = _append(flusher, logs[0])
        mock_clock.jump(UNWAITED_FLUSH_DELAY_S)
        await _until(lambda: logs[0].high_watermark == end)
        await trio.testing.wait_all_tasks_blocked()
        assert (flusher.fsyncs, logs[1].durable_offset) == (1, 0)
        mock_clock.jump(1.0)
        await _until(lambda: logs[1].high_watermark == lazy_end)
        assert flusher.fsyncs == 2
        nursery.cancel_scope.cancel()


async def test_unwaited_append_rides_with_the_next_waiters_fsync(logs, mock_clock) -> None:
    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        _append(flusher, logs[0])  # nobody waits for this one
        end = _append(flusher, logs[0])
        await flusher.wait_durable(logs[0], end)  # the clock never moves: only the waiter starts an fsync
        assert flusher.fsyncs == 1 and logs[0].durable_offset == end
        nursery.cancel_scope.cancel()


#: How long the helper holds the slow log's fsync (its ``delay_ms``, the mechanism of the ``delay`` fault action).
SLOW_FSYNC_MS = 2000


async def test_slow_fsync_of_one_log_does_not_hold_back_another(logs, monkeypatch) -> None:
    flusher = _flusher()
    submit = flusher._syncer.submit

    def slow_for_first_log(item, fds, *, full: bool, delay_ms: int = 0) -> None:
        submit(item, fds, full=full, delay_ms=SLOW_FSYNC_MS if item[0] is logs[0] else delay_ms)

    monkeypatch.setattr(flusher._syncer, "submit", slow_for_first_log)
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        slow_end = _append(flusher, logs[0])
        fast_end = _append(flusher, logs[1])
        slow_done = trio.Event()

        async def wait_slow() -> None:
            await flusher.wait_durable(logs[0], slow_end)
            slow_done.set()

        started = time.monotonic()
        nursery.start_soon(wait_slow)
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(5):
            await flusher.wait_durable(logs[1], fast_end)
        assert time.monotonic() - started < SLOW_FSYNC_MS / 1000
        assert not slow_done.is_set() and logs[0].high_watermark == 0
        with trio.fail_after(10):
            await slow_done.wait()
        assert logs[0].high_watermark == slow_end and logs[0].durable_offset == slow_end
        nursery.cancel_scope.cancel()


#: How long the helper holds each fsync where a test looks at what started before any finished.
HELD_FSYNC_MS = 500


async def test_requested_syncs_start_together_once_the_caller_yields(logs, monkeypatch) -> None:
    """``request_sync`` starts nothing while the caller runs (the appends it makes next share the fsync), then one
    fsync per log at once, in parallel, without anyone waiting."""
    flusher = _flusher()
    submit = flusher._syncer.submit
    submitted: list[tuple[PartitionLog, int]] = []

    def held(item, fds, *, full: bool, delay_ms: int = 0) -> None:
        submitted.append((item[0], item[1]))
        submit(item, fds, full=full, delay_ms=HELD_FSYNC_MS)

    monkeypatch.setattr(flusher._syncer, "submit", held)
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        first = _append(flusher, logs[0])
        flusher.request_sync(logs[0], first)
        second = _append(flusher, logs[0])
        flusher.request_sync(logs[1], _append(flusher, logs[1]))
        assert submitted == []
        await trio.testing.wait_all_tasks_blocked()
        # Both started, the first covering the append made after its request; neither has finished.
        assert sorted(submitted, key=lambda s: logs.index(s[0])) == [(logs[0], second), (logs[1], 1)]
        assert logs[0].durable_offset == logs[1].durable_offset == 0
        with trio.fail_after(10):
            await _until(lambda: logs[0].high_watermark == second and logs[1].high_watermark == 1)
        assert flusher.fsyncs == 2
        nursery.cancel_scope.cancel()


async def test_fsync_error_reaches_that_logs_waiters_only_and_a_retry_succeeds(logs, monkeypatch) -> None:
    """The helper's fdatasync fails (a pipe cannot be synced: EINVAL) for one log; the other log is unaffected, and
    once the disk recovers a later fsync covers the same bytes."""
    flusher = _flusher()
    pipe_read, pipe_write = os.pipe()
    real_plan = logs[0].sync_plan

    def unsyncable_plan(up_to: int | None = None, *, data_only: bool) -> SyncPlan | None:
        plan = real_plan(up_to, data_only=data_only)
        assert plan is not None
        for fd in plan.fds:
            os.close(fd)
        return dataclasses.replace(plan, fds=(os.dup(pipe_read),))

    monkeypatch.setattr(logs[0], "sync_plan", unsyncable_plan)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            bad_end = _append(flusher, logs[0])
            good_end = _append(flusher, logs[1])
            with trio.fail_after(5), pytest.raises(KafkaStorageError, match="Invalid argument"):
                await flusher.wait_durable(logs[0], bad_end)
            with trio.fail_after(5):
                await flusher.wait_durable(logs[1], good_end)
            assert logs[0].high_watermark == 0 and logs[0].durable_offset == 0
            assert logs[1].high_watermark == good_end
            monkeypatch.undo()  # the disk recovers: the bytes are still there and a later fsync covers them
            with trio.fail_after(5):
                await flusher.wait_durable(logs[0], bad_end)
            assert logs[0].high_watermark == bad_end and logs[0].durable_offset == bad_end
            nursery.cancel_scope.cancel()
    finally:
        os.close(pipe_read)
        os.close(pipe_write)


async def test_injected_fsync_error_fails_the_waiter_without_reaching_the_helper(logs) -> None:
    from oncelog.storage import faults

    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        faults.configure("storage.fsync:eio")
        try:
            end = _append(flusher, logs[0])
            with trio.fail_after(5), pytest.raises(KafkaStorageError, match="injected I/O error"):
                await flusher.wait_durable(logs[0], end)
        finally:
            faults.configure("")
        with trio.fail_after(5):
            await flusher.wait_durable(logs[0], end)  # one-shot: the retry syncs
        assert logs[0].durable_offset == end
        nursery.cancel_scope.cancel()


async def test_a_failed_requested_fsync_reaches_its_request_even_after_a_later_one_succeeds(logs) -> None:
    """The waiter ``request_sync`` returns is registered at once: an fsync that fails before the request waits
    still fails it, although the next fsync of the log then succeeds (the data may not have reached the disk)."""
    from oncelog.storage import faults

    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        faults.configure("storage.fsync:eio")
        try:
            requested = flusher.request_sync(logs[0], _append(flusher, logs[0]))
            with trio.fail_after(5):
                await _until(lambda: flusher.fsyncs == 1)  # the requested fsync ran, and failed
        finally:
            faults.configure("")
        later = _append(flusher, logs[0])
        with trio.fail_after(5):
            await flusher.wait_durable(logs[0], later)
        assert logs[0].durable_offset == later
        with trio.fail_after(5), pytest.raises(KafkaStorageError, match="injected I/O error"):
            await flusher.wait_for(requested)
        nursery.cancel_scope.cancel()


async def test_flusher_stops_the_broker_when_the_helper_dies(logs) -> None:
    flusher = _flusher()
    with pytest.raises(BaseExceptionGroup) as raised:
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            pid = flusher._syncer.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(5):
                await trio.sleep_forever()
    assert raised.group_contains(SyncHelperDied, depth=None)


async def test_concurrent_waiters_on_one_log_share_fsyncs(logs) -> None:
    flusher = _flusher()
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        ends = [_append(flusher, logs[0]) for _ in range(20)]
        async with trio.open_nursery() as waiters:
            for end in ends:
                waiters.start_soon(flusher.wait_durable, logs[0], end)
        assert logs[0].high_watermark == ends[-1]
        assert flusher.fsyncs <= 2  # one fsync covers all 20 appends (a second only if one raced it)
        nursery.cancel_scope.cancel()
